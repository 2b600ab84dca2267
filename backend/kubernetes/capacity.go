package kubernetes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/execbox/execbox/sandbox"
)

// Capacity is how many sandboxes of the default limits the namespace's
// ResourceQuotas allow at once, less the Pods the warm pool may hold
// (kubernetes.warm_max): the engine admits this backend's runs by it, not
// by the server's own cores (the server only relays). The tightest
// resource of every quota wins, and the answer names it. A namespace
// without a quota is bounded by what its nodes report allocatable (pods,
// memory, and cpu against the Pod's requests); one whose nodes cannot be
// listed either (RBAC) is an error, and the engine keeps the host's bound.
func (b *Backend) Capacity(ctx context.Context) (sandbox.Capacity, error) {
	if err := b.connect(); err != nil {
		return sandbox.Capacity{}, err
	}
	req, lim := podResources(b.podSpec(sandbox.Spec{Limits: b.defaults}, "capacity"))
	qs, err := b.cs.CoreV1().ResourceQuotas(b.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return sandbox.Capacity{}, b.wrap(err, "listing the namespace's ResourceQuotas")
	}
	best := sandbox.Capacity{Runs: -1}
	fit := func(n int64, source string) {
		if best.Runs < 0 || n < int64(best.Runs) {
			best = sandbox.Capacity{Runs: int(min(n, 1<<30)), Source: source}
		}
	}
	for _, q := range qs.Items {
		for name, hard := range q.Spec.Hard {
			var per resource.Quantity
			switch name {
			case corev1.ResourcePods, "count/pods":
				per = *resource.NewQuantity(1, resource.DecimalSI)
			case corev1.ResourceRequestsCPU, corev1.ResourceCPU:
				per = req[corev1.ResourceCPU]
			case corev1.ResourceRequestsMemory, corev1.ResourceMemory:
				per = req[corev1.ResourceMemory]
			case corev1.ResourceLimitsCPU:
				per = lim[corev1.ResourceCPU]
			case corev1.ResourceLimitsMemory:
				per = lim[corev1.ResourceMemory]
			default:
				continue
			}
			if per.IsZero() {
				continue
			}
			fit(hard.MilliValue()/per.MilliValue(), fmt.Sprintf("the ResourceQuota %s of namespace %s: %s %s, %s a sandbox of the default limits", q.Name, b.ns, name, hard.String(), per.String()))
		}
	}
	if best.Runs < 0 {
		nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return sandbox.Capacity{}, b.wrap(err, "listing the nodes (namespace "+b.ns+" has no ResourceQuota)")
		}
		var pods, mem, cpu int64
		for _, n := range nodes.Items {
			if n.Spec.Unschedulable {
				continue
			}
			pods += n.Status.Allocatable.Pods().Value()
			mem += n.Status.Allocatable.Memory().Value()
			cpu += n.Status.Allocatable.Cpu().MilliValue()
		}
		fit(pods, fmt.Sprintf("the nodes' allocatable pods, %d (namespace %s has no ResourceQuota)", pods, b.ns))
		// The scheduler places a Pod only where its requests fit: more
		// runs than that would wait Pending, holding their slots.
		if per := req[corev1.ResourceMemory]; !per.IsZero() {
			fit(mem/per.Value(), fmt.Sprintf("the nodes' allocatable memory, %s, %s a sandbox of the default limits (namespace %s has no ResourceQuota)",
				sandbox.HumanSize(mem), per.String(), b.ns))
		}
		if per := req[corev1.ResourceCPU]; !per.IsZero() {
			fit(cpu/per.MilliValue(), fmt.Sprintf("the nodes' allocatable cpu, %s, %s requested by a sandbox of the default limits (namespace %s has no ResourceQuota)",
				resource.NewMilliQuantity(cpu, resource.DecimalSI), per.String(), b.ns))
		}
	}
	if w := b.cfg.warmSizing().Max; w > 0 {
		best.Runs = max(best.Runs-w, 0)
		best.Source += fmt.Sprintf(", less the %d Pods the warm pool may hold (kubernetes.warm_max)", w)
	}
	return best, nil
}

// podResources are what the scheduler and a quota count for pod: each of
// its containers' requests and limits added, or an init container's when
// it is larger (init containers run one at a time, before the rest).
func podResources(pod *corev1.Pod) (req, lim corev1.ResourceList) {
	req, lim = corev1.ResourceList{}, corev1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		for n, q := range c.Resources.Requests {
			v := req[n]
			v.Add(q)
			req[n] = v
		}
		for n, q := range c.Resources.Limits {
			v := lim[n]
			v.Add(q)
			lim[n] = v
		}
	}
	for _, c := range pod.Spec.InitContainers {
		for n, q := range c.Resources.Requests {
			if q.Cmp(req[n]) > 0 {
				req[n] = q
			}
		}
		for n, q := range c.Resources.Limits {
			if q.Cmp(lim[n]) > 0 {
				lim[n] = q
			}
		}
	}
	return req, lim
}
