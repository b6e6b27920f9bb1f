package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"claimstore.dev/claimstore"
)

func main() {
	ctx := context.Background()
	store, err := claimstore.Open(ctx, os.Args[1], claimstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	key := claimstore.Key{Namespace: "team-a", Name: "trainer-gpus"}
	claim := `{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1",
	  "metadata":{"name":"trainer-gpus","namespace":"team-a","uid":"8f0c"},"status":{}}`
	if _, err := store.PutJSON(ctx, []byte(claim), claimstore.Preconditions{}); err != nil {
		log.Fatal(err)
	}
	gpu := claimstore.DeviceResult{Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-3"}
	allocated, err := store.Allocate(ctx, key, []claimstore.DeviceResult{gpu},
		claimstore.AllocateOptions{NodeName: "node-1"}, claimstore.Preconditions{})
	if err != nil {
		log.Fatal(err)
	}

	// Two schedulers saw the claim at the same revision: exactly one wins.
	seen := allocated.Revision
	podA := claimstore.Consumer{Resource: "pods", Name: "pod-a", UID: "uid-a"}
	podB := claimstore.Consumer{Resource: "pods", Name: "pod-b", UID: "uid-b"}
	if _, err := store.Reserve(ctx, key, podA, claimstore.Preconditions{ModRevision: &seen}); err != nil {
		log.Fatal(err)
	}
	_, err = store.Reserve(ctx, key, podB, claimstore.Preconditions{ModRevision: &seen})
	var conflict *claimstore.ConflictError
	if errors.As(err, &conflict) {
		fmt.Printf("pod-b requeues: the claim is at revision %d\n", conflict.CurrentRevision)
	}

	c, err := store.Get(key)
	if err != nil {
		log.Fatal(err)
	}
	state, err := store.AllocatedDevices()
	if err != nil {
		log.Fatal(err)
	}
	defer state.Close()
	d, _ := state.Find("gpu.example.com", "node-1", "gpu-3")
	fmt.Printf("%s is reserved for %s; gpu-3 is held by %s (revision %d)\n",
		c.Key(), c.ReservedFor()[0].Name, d.Exclusive, state.Revision())
}
