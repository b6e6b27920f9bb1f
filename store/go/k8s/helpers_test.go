package k8s

import (
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

type resourceQuantity = resource.Quantity

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func sortStrings(s []string) []string { slices.Sort(s); return s }

func sameSet(a, b sets.Set[structured.DeviceID]) bool { return a.Equal(b) }

func itoa(i int) string { return strconv.Itoa(i) }
