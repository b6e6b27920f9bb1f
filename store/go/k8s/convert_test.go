package k8s

import (
	"bytes"
	"math/rand"
	"os"
	"strconv"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/randfill"

	"claimstore.dev/claimstore"
)

// apiSerializer is k8s.io/apimachinery's JSON serializer with
// resource.k8s.io/v1 registered: the bytes the API server writes.
func apiSerializer(t testing.TB) (*kjson.Serializer, serializer.CodecFactory) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := resourcev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	codecs := serializer.NewCodecFactory(scheme)
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{}), codecs
}

// fuzzedClaims returns n claims whose status is filled by Kubernetes' own
// fuzzer (randfill with apimachinery's fuzzer functions, as the API's
// round-trip tests use them), and whose metadata and spec hold what
// claimstore keeps: the input the codec must carry without loss.
func fuzzedClaims(t testing.TB, seed int64, n int, codecs serializer.CodecFactory) []*resourcev1.ResourceClaim {
	t.Helper()
	f := randfill.New().NilChance(0.3).NumElements(0, 3).RandSource(rand.NewSource(seed)).
		Funcs(metafuzzer.Funcs(codecs)...)
	out := make([]*resourcev1.ResourceClaim, n)
	for i := range out {
		var meta metav1.ObjectMeta
		f.Fill(&meta)
		var status resourcev1.ResourceClaimStatus
		f.Fill(&status)
		c := &resourcev1.ResourceClaim{
			TypeMeta: metav1.TypeMeta{Kind: "ResourceClaim", APIVersion: "resource.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "claim-" + strconv.Itoa(i), Namespace: "ns-" + strconv.Itoa(i%7),
				UID: meta.UID, ResourceVersion: meta.ResourceVersion, Generation: meta.Generation,
				CreationTimestamp: meta.CreationTimestamp, DeletionTimestamp: meta.DeletionTimestamp,
			},
			Status: status,
		}
		for r := 0; r < i%3; r++ {
			c.Spec.Devices.Requests = append(c.Spec.Devices.Requests,
				resourcev1.DeviceRequest{Name: "req-" + strconv.Itoa(r)})
		}
		out[i] = c
	}
	return out
}

// The codec against Kubernetes' own: every fuzzed claim, written by
// apimachinery's serializer, is read by claimstore's decoder, comes back
// from the record (FromRecord) equal under apiequality.Semantic, and
// claimstore's JSON of the record is the serializer's, byte for byte.
func TestFuzzedClaimsRoundTripThroughRecords(t *testing.T) {
	n := 100_000
	if testing.Short() || os.Getenv("CLAIMSTORE_K8S_FUZZ_CLAIMS") != "" {
		n, _ = strconv.Atoi(os.Getenv("CLAIMSTORE_K8S_FUZZ_CLAIMS"))
		if n == 0 {
			n = 2_000
		}
	}
	ser, codecs := apiSerializer(t)
	const batch = 1_000
	for start := 0; start < n; start += batch {
		claims := fuzzedClaims(t, int64(start), min(batch, n-start), codecs)
		for i, want := range claims {
			var buf bytes.Buffer
			if err := ser.Encode(want, &buf); err != nil {
				t.Fatalf("claim %d: apimachinery cannot encode it: %v", start+i, err)
			}
			apiJSON := bytes.TrimRight(buf.Bytes(), "\n")
			decoded, err := claimstore.Decode(apiJSON)
			if err != nil {
				t.Fatalf("claim %d: claimstore refuses what apimachinery wrote: %v\n%s", start+i, err, apiJSON)
			}
			if len(decoded) != 1 {
				t.Fatalf("claim %d: decoded %d claims", start+i, len(decoded))
			}
			got, err := FromRecord(decoded[0].Claim)
			if err != nil {
				t.Fatalf("claim %d: %v", start+i, err)
			}
			if !apiequality.Semantic.DeepEqual(want, got) {
				t.Fatalf("claim %d differs after the round trip (-want +got):\n%s", start+i, diff.Diff(want, got))
			}
			ours, err := decoded[0].Claim.JSON()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ours, apiJSON) {
				t.Fatalf("claim %d: claimstore's JSON is not apimachinery's:\nclaimstore:   %s\napimachinery: %s", start+i, ours, apiJSON)
			}
		}
	}
}
