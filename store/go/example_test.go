package claimstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"claimstore.dev/claimstore"
)

// exampleDir is a fresh directory for one example's database, and what
// removes it.
func exampleDir() (string, func()) {
	dir, err := os.MkdirTemp("", "claimstore-example-")
	if err != nil {
		panic(err)
	}
	return filepath.Join(dir, "db"), func() { os.RemoveAll(dir) }
}

const exampleClaim = `{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
 "metadata":{"name":"gpus","namespace":"team-a","uid":"0f2c9a4e-5b1d-4c3e-9a7f-2d8b6c1e4f90"},
 "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}}]}},
 "status":{"allocation":{"devices":{"results":[
  {"request":"gpu","driver":"gpu.example.com","pool":"node-1","device":"gpu-0"}]}}}}`

func ExampleOpen() {
	ctx := context.Background()
	dir, remove := exampleDir()
	defer remove()
	store, err := claimstore.Open(ctx, dir, claimstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	r, err := store.PutJSON(ctx, []byte(exampleClaim), claimstore.Preconditions{})
	if err != nil {
		panic(err)
	}
	c, err := store.Get(claimstore.Key{Namespace: "team-a", Name: "gpus"})
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Key(), "holds", c.ResultAt(0).Device, "at revision", r.Revision)
	// Output: team-a/gpus holds gpu-0 at revision 1
}

// A filter that reads a claim's devices many times per cycle reads it
// through a view: no allocation; what it keeps it copies before Release.
func ExampleStore_GetView() {
	ctx := context.Background()
	dir, remove := exampleDir()
	defer remove()
	store, err := claimstore.Open(ctx, dir, claimstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if _, err := store.PutJSON(ctx, []byte(exampleClaim), claimstore.Preconditions{}); err != nil {
		panic(err)
	}
	v, err := store.GetView(claimstore.Key{Namespace: "team-a", Name: "gpus"})
	if err != nil {
		panic(err)
	}
	var devices []string
	for i := 0; i < v.NumResults(); i++ {
		devices = append(devices, strings.Clone(v.ResultAt(i).Device))
	}
	v.Release() // v and the strings it returned are not used after this
	fmt.Println("team-a/gpus holds", devices)
	// Output: team-a/gpus holds [gpu-0]
}

// Two schedulers read the claim at one revision and reserve it for their
// pods with compare-and-set: the first wins, the second gets ErrConflict
// with the revision to read again from.
func ExampleStore_Reserve() {
	ctx := context.Background()
	dir, remove := exampleDir()
	defer remove()
	store, err := claimstore.Open(ctx, dir, claimstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	put, _ := store.PutJSON(ctx, []byte(exampleClaim), claimstore.Preconditions{})
	key := claimstore.Key{Namespace: "team-a", Name: "gpus"}
	seen := put.Revision
	podA := claimstore.Consumer{Resource: "pods", Name: "pod-a", UID: "uid-a"}
	podB := claimstore.Consumer{Resource: "pods", Name: "pod-b", UID: "uid-b"}
	if _, err := store.Reserve(ctx, key, podA, claimstore.Preconditions{ModRevision: &seen}); err != nil {
		panic(err)
	}
	_, err = store.Reserve(ctx, key, podB, claimstore.Preconditions{ModRevision: &seen})
	var conflict *claimstore.ConflictError
	if errors.As(err, &conflict) {
		fmt.Println("pod-b lost; the claim is now at revision", conflict.CurrentRevision)
	}
	// Output: pod-b lost; the claim is now at revision 2
}

// The change feed: every committed change, in revision order.
func ExampleStore_Watch() {
	ctx := context.Background()
	dir, remove := exampleDir()
	defer remove()
	store, err := claimstore.Open(ctx, dir, claimstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	w, err := store.Watch(ctx, 0, claimstore.WatchOptions{Namespace: "team-a"})
	if err != nil {
		panic(err)
	}
	defer w.Close()
	if _, err := store.PutJSON(ctx, []byte(exampleClaim), claimstore.Preconditions{}); err != nil {
		panic(err)
	}
	e, err := w.Next(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(e.Type, e.Key, "at revision", e.Revision)
	// Output: ADDED team-a/gpus at revision 1
}

// A pod's candidate devices on one node asked in one call, on a snapshot
// of everything allocated (taken in constant time).
func ExampleAllocatedState_TakenMany() {
	ctx := context.Background()
	dir, remove := exampleDir()
	defer remove()
	store, err := claimstore.Open(ctx, dir, claimstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if _, err := store.PutJSON(ctx, []byte(exampleClaim), claimstore.Preconditions{}); err != nil {
		panic(err)
	}
	state, err := store.AllocatedDevices()
	if err != nil {
		panic(err)
	}
	defer state.Close()
	fmt.Println(state.TakenMany("gpu.example.com", "node-1", []string{"gpu-0", "gpu-1"}, nil))
	// Output: [true false]
}

// Every claim, a page per call into the store.
func ExampleStore_All() {
	ctx := context.Background()
	dir, remove := exampleDir()
	defer remove()
	store, err := claimstore.Open(ctx, dir, claimstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if _, err := store.PutJSON(ctx, []byte(exampleClaim), claimstore.Preconditions{}); err != nil {
		panic(err)
	}
	for c, err := range store.All(ctx, claimstore.ListOptions{}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(c.Key(), c.Allocated())
	}
	// Output: team-a/gpus true
}
