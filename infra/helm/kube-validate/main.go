// kube-validate decodes Kubernetes manifests strictly into the Go types of the Kubernetes API (k8s.io/api at the
// version go.mod pins), of the Prometheus Operator (monitoring.coreos.com/v1) and of KEDA (keda.sh/v1alpha1, the
// ScaledObject fields mirrored below), as the API server would: an unknown kind or apiVersion, an unknown or
// duplicated field, or a value of the wrong type fails. Reads multi-document YAML (`helm template` output) from the
// files given, or stdin; prints one line per object; exits 1 when any object is refused.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func main() {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme,
		autoscalingv2.AddToScheme, networkingv1.AddToScheme, rbacv1.AddToScheme, monitoringv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()

	inputs := map[string]io.Reader{}
	names := os.Args[1:]
	if len(names) == 0 {
		names = []string{"-"}
		inputs["-"] = os.Stdin
	}
	failed, seen := 0, 0
	for _, name := range names {
		r := inputs[name]
		if r == nil {
			f, err := os.Open(name)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			defer f.Close()
			r = f
		}
		docs := utilyaml.NewYAMLReader(bufio.NewReader(r))
		for {
			doc, err := docs.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
				os.Exit(2)
			}
			if isEmpty(doc) {
				continue
			}
			seen++
			id, err := check(decoder, doc)
			if err != nil {
				failed++
				fmt.Printf("REFUSED %s (%s): %v\n", id, name, err)
			} else {
				fmt.Printf("ok %s\n", id)
			}
		}
	}
	fmt.Printf("%d objects, %d refused\n", seen, failed)
	if failed > 0 || seen == 0 {
		os.Exit(1)
	}
}

// isEmpty: a document of comments and blank lines only (helm template leaves some).
func isEmpty(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			return false
		}
	}
	return true
}

func check(decoder runtime.Decoder, doc []byte) (string, error) {
	var head struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return "?", err
	}
	id := fmt.Sprintf("%s %s/%s", head.APIVersion, head.Kind, head.Metadata.Name)
	if head.Metadata.Name == "" {
		return id, errors.New("metadata.name is empty")
	}
	if head.APIVersion == "keda.sh/v1alpha1" {
		return id, checkKeda(head.Kind, doc)
	}
	_, _, err := decoder.Decode(doc, nil, nil)
	return id, err
}

// The fields of KEDA's ScaledObject (keda.sh/v1alpha1, KEDA 2.x) that a chart sets; KEDA's own module is too large
// to build for a check. Unknown fields are refused, as for the other kinds.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion,omitempty"`
			Kind       string `json:"kind,omitempty"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		PollingInterval *int32 `json:"pollingInterval,omitempty"`
		CooldownPeriod  *int32 `json:"cooldownPeriod,omitempty"`
		MinReplicaCount *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount *int32 `json:"maxReplicaCount,omitempty"`
		Triggers        []struct {
			Type     string            `json:"type"`
			Name     string            `json:"name,omitempty"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

func checkKeda(kind string, doc []byte) error {
	if kind != "ScaledObject" {
		return fmt.Errorf("no kind %q known in keda.sh/v1alpha1", kind)
	}
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.DisallowUnknownFields()
	var so scaledObject
	if err := d.Decode(&so); err != nil {
		return err
	}
	if so.Spec.ScaleTargetRef.Name == "" || len(so.Spec.Triggers) == 0 {
		return errors.New("spec.scaleTargetRef.name and spec.triggers are required")
	}
	return nil
}
