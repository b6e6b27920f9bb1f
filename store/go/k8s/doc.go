// Package k8s connects claimstore to Kubernetes' Go: conversions between
// resource.k8s.io/v1 ResourceClaims and claimstore records (FromRecord,
// StatusFromRecord), a Tracker that implements kube-scheduler's
// framework.ResourceClaimTracker over a claimstore Store, and a Manager,
// its framework.SharedDRAManager.
//
// The module is claimstore.dev/claimstore/k8s (store/go/k8s); it depends
// on one Kubernetes release (k8s.io/api, apimachinery, client-go,
// kube-scheduler and dynamic-resource-allocation v0.37.2), so that the
// core package claimstore.dev/claimstore stays free of them.
package k8s
