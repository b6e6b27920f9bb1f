// Package scheduler runs kube-scheduler's DynamicResources plugin on
// claimstore: the ClaimstoreDynamicResources plugin is upstream's plugin
// (k8s.io/kubernetes v1.37.2) built with a framework Handle whose
// SharedDRAManager answers ResourceClaims from a claimstore Tracker over a
// store on disk (or, with etcd endpoints, the shared mode), and
// ResourceSlices and DeviceClasses from the scheduler's own listers.
//
// The module is claimstore.dev/claimstore/k8s/scheduler (store/go/k8s/scheduler);
// it imports k8s.io/kubernetes, which the module claimstore.dev/claimstore/k8s
// does not. cmd/claimstore-scheduler is the scheduler binary.
package scheduler
