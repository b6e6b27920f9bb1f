// Command claimstore-scheduler is kube-scheduler (k8s.io/kubernetes
// v1.37.2) with the ClaimstoreDynamicResources plugin registered: a
// profile that disables DynamicResources and enables it schedules DRA
// claims from a claimstore store. Flags and configuration are
// kube-scheduler's; the plugin's own are its pluginConfig args.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"claimstore.dev/claimstore/k8s/scheduler"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand(scheduler.Options()...)))
}
