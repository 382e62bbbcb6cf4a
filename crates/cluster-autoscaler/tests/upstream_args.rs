//! Real manifests start: the binary accepts the argument lists that upstream's Helm chart, the
//! Cluster API provider's documentation and the OpenShift cluster-autoscaler-operator give
//! upstream's binary, exactly as written there (flags only, no subcommand). Each list goes
//! through `run`'s option parsing and validation (`--validate-only` stops before any cluster
//! is contacted). Also: no argument starts `run`, and a flag asking for a feature this
//! autoscaler does not have is said at start.

use std::process::{Command, Output};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"));
    // Keep kube's inference from finding a real cluster on the test machine.
    c.env_remove("KUBERNETES_SERVICE_HOST")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("RUST_LOG");
    c
}

fn validate(args: &[&str]) -> Output {
    bin()
        .args(args)
        .arg("--validate-only")
        .output()
        .expect("the binary runs")
}

/// Asserts the list passes validation (exit 0) and returns stderr.
fn accepted(source: &str, args: &[&str]) -> String {
    let out = validate(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{source}: {args:?} rejected:\n{stderr}"
    );
    assert!(
        stderr.contains("flags and configuration are valid"),
        "{stderr}"
    );
    stderr
}

/// kubernetes/autoscaler charts/cluster-autoscaler: templates/deployment.yaml renders, for
/// `cloudProvider: clusterapi`, `--cloud-provider`, `--namespace`, the auto-discovery flag and
/// then values.yaml's default `extraArgs` (logtostderr: true, stderrthreshold: info, v: 4) as
/// `--key=value`; each `clusterAPIMode` adds its kubeconfig flags.
#[test]
fn helm_chart_clusterapi_defaults_are_accepted() {
    let base = [
        "--cloud-provider=clusterapi",
        "--namespace=kube-system",
        "--node-group-auto-discovery=clusterapi:clusterName=my-cluster",
        "--logtostderr=true",
        "--stderrthreshold=info",
        "--v=4",
    ];
    let modes: [&[&str]; 5] = [
        // incluster-incluster (the default)
        &[],
        // incluster-kubeconfig
        &["--cloud-config=/etc/kubernetes/mgmt-kubeconfig"],
        // kubeconfig-incluster
        &[
            "--kubeconfig=/etc/kubernetes/value",
            "--clusterapi-cloud-config-authoritative",
        ],
        // kubeconfig-kubeconfig
        &[
            "--kubeconfig=/etc/kubernetes/value",
            "--cloud-config=/etc/kubernetes/mgmt-kubeconfig",
        ],
        // single-kubeconfig
        &["--kubeconfig=/etc/kubernetes/value"],
    ];
    for mode in modes {
        let args: Vec<&str> = base.iter().chain(mode).copied().collect();
        accepted("helm chart", &args);
    }
}

/// The same chart with the `extraArgs` that values.yaml lists commented out, uncommented as a
/// user does (rendered in key order as `--key=value`).
#[test]
fn helm_chart_documented_extra_args_are_accepted() {
    accepted(
        "helm chart extraArgs",
        &[
            "--cloud-provider=clusterapi",
            "--namespace=kube-system",
            "--node-group-auto-discovery=clusterapi:namespace=default",
            "--balance-similar-node-groups=true",
            "--expander=random",
            "--leader-elect=true",
            "--logtostderr=true",
            "--max-node-provision-time=15m0s",
            "--min-replica-count=0",
            "--scale-down-delay-after-add=10m",
            "--scale-down-delay-after-delete=0s",
            "--scale-down-delay-after-failure=3m",
            "--scale-down-enabled=true",
            "--scale-down-non-empty-candidates-count=30",
            "--scale-down-unneeded-time=10m",
            "--scale-down-utilization-threshold=0.5",
            "--scan-interval=10s",
            "--skip-nodes-with-local-storage=true",
            "--skip-nodes-with-system-pods=true",
            "--stderrthreshold=info",
            "--v=4",
            "--write-status-configmap=true",
        ],
    );
}

/// kubernetes/autoscaler cluster-autoscaler/cloudprovider/clusterapi/README.md: the command
/// lines of "Connecting cluster-autoscaler to Cluster API management and workload Clusters"
/// and the auto-discovery examples.
#[test]
fn cluster_api_docs_examples_are_accepted() {
    let examples: [&[&str]; 9] = [
        &["--cloud-provider=clusterapi"],
        &[
            "--cloud-provider=clusterapi",
            "--cloud-config=/mnt/kubeconfig",
        ],
        &[
            "--cloud-provider=clusterapi",
            "--kubeconfig=/mnt/kubeconfig",
            "--clusterapi-cloud-config-authoritative",
        ],
        &[
            "--cloud-provider=clusterapi",
            "--kubeconfig=/mnt/workload.kubeconfig",
            "--cloud-config=/mnt/management.kubeconfig",
        ],
        &[
            "--cloud-provider=clusterapi",
            "--kubeconfig=/mnt/workload.kubeconfig",
        ],
        &[
            "--cloud-provider=clusterapi",
            "--node-group-auto-discovery=clusterapi:namespace=blue",
        ],
        &[
            "--cloud-provider=clusterapi",
            "--node-group-auto-discovery=clusterapi:clusterName=test1",
        ],
        &[
            "--cloud-provider=clusterapi",
            "--node-group-auto-discovery=clusterapi:color=green,shape=square",
        ],
        &[
            "--cloud-provider=clusterapi",
            "--node-group-auto-discovery=clusterapi:namespace=staging,clusterName=purple,owner=jim",
        ],
    ];
    for args in examples {
        accepted("cluster api docs", args);
    }
    // The balancing and min-size sections' flags.
    accepted(
        "cluster api docs",
        &[
            "--cloud-provider=clusterapi",
            "--balance-similar-node-groups",
            "--balancing-ignore-label=topology.ebs.csi.aws.com/zone",
            "--enforce-node-group-min-size",
        ],
    );
}

/// The same README's GPU section limits GPUs by the value of the nodes'
/// `cluster-api/accelerator` label, not by a resource name.
#[test]
fn cluster_api_docs_gpu_example_is_accepted() {
    accepted(
        "cluster api docs",
        &[
            "--cloud-provider=clusterapi",
            "--gpu-total=gfx-hardware:1:2",
        ],
    );
}

/// openshift/cluster-autoscaler-operator pkg/controller/clusterautoscaler/clusterautoscaler.go
/// (`AutoscalerArgs`): the fixed arguments, then those of a `ClusterAutoscaler` with every
/// field set (resource limits, scale-down, scale-up, balancing, expanders, verbosity), on AWS
/// with the ProvisioningRequest feature gate on. `cloud` is the `--cloud-provider` value the
/// operator passes (`openshift`); `cordon` the `--cordon-node-before-terminating` argument.
fn openshift_operator_args<'a>(cloud: &'a str, cordon: Option<&'a str>) -> Vec<&'a str> {
    let mut args = vec![
        "--logtostderr",
        "--record-duplicated-events",
        cloud,
        "--namespace=openshift-machine-api",
        "--leader-elect-lease-duration=137s",
        "--leader-elect-renew-deadline=107s",
        "--leader-elect-retry-period=26s",
        "--max-bulk-soft-taint-count=0",
        "--kube-api-content-type=application/json",
        "--node-group-auto-discovery=clusterapi:namespace=openshift-cluster-api",
        "--enable-provisioning-requests=true",
        "--startup-taint=node.cloudprovider.kubernetes.io/uninitialized",
        "--max-graceful-termination-sec=600",
        "--max-node-provision-time=30m",
        "--expendable-pods-priority-cutoff=-10",
        "--max-nodes-total=24",
        "--cores-total=8:128",
        "--memory-total=4:256",
        "--gpu-total=nvidia.com/gpu:0:16",
        "--scale-down-enabled=true",
        "--scale-down-delay-after-add=10s",
        "--scale-down-delay-after-delete=10s",
        "--scale-down-delay-after-failure=10s",
        "--scale-down-unneeded-time=10s",
        "--scale-down-utilization-threshold=0.4",
    ];
    args.extend(cordon);
    args.extend([
        "--new-pod-scale-up-delay=10s",
        "--balance-similar-node-groups=true",
        "--balancing-ignore-label=topology.ebs.csi.aws.com/zone",
        "--balancing-ignore-label=lifecycle",
        "--balancing-ignore-label=k8s.amazonaws.com/eniConfig",
        "--balancing-ignore-label=eks.amazonaws.com/nodegroup",
        "--balancing-ignore-label=alpha.eksctl.io/nodegroup-name",
        "--balancing-ignore-label=alpha.eksctl.io/instance-id",
        "--balancing-ignore-label=topology.k8s.aws/zone-id",
        "--ignore-daemonsets-utilization=true",
        "--skip-nodes-with-local-storage=true",
        "--balancing-ignore-label=my.custom/label",
        "--v=1",
        "--expander=priority,least-waste",
        "--enforce-node-group-min-size=true",
    ]);
    args
}

#[test]
fn openshift_operator_args_are_accepted() {
    accepted(
        "openshift operator",
        &openshift_operator_args(
            "--cloud-provider=openshift",
            Some("--cordon-node-before-terminating=true"),
        ),
    );
}

/// The operator's arguments minus the two that other changes bring (the `openshift` provider
/// name and cordoning), so the rest is checked now; `--enable-provisioning-requests` is
/// implemented, not a gap.
#[test]
fn openshift_operator_args_without_the_provider_name_are_accepted() {
    let stderr = accepted(
        "openshift operator",
        &openshift_operator_args("--cloud-provider=clusterapi", None),
    );
    assert!(
        !stderr.contains("--enable-provisioning-requests"),
        "{stderr}"
    );
    for no_effect in [
        "--logtostderr",
        "--record-duplicated-events",
        "--kube-api-content-type",
    ] {
        assert!(stderr.contains(no_effect), "{no_effect}: {stderr}");
    }
}

#[test]
fn a_gap_is_said_at_start_and_its_default_is_silent() {
    let stderr = accepted(
        "gap",
        &["--parallel-scale-up=true", "--log_file=/tmp/ca.log"],
    );
    for needle in [
        "--parallel-scale-up",
        "resized one after another, not concurrently",
        "--log-file",
        "never to files",
    ] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    let stderr = accepted("gap", &["--parallel-scale-up=false"]);
    assert!(!stderr.contains("does not have"), "{stderr}");
}

#[test]
fn bad_values_of_upstream_only_flags_exit_2_naming_the_flag() {
    for (arg, name) in [
        ("--predicate-parallelism=four", "--predicate-parallelism"),
        ("--profiling=yes", "--profiling"),
        ("--feature-gates=NoValue", "--feature-gates"),
        (
            "--node-info-cache-expire-time=forever",
            "--node-info-cache-expire-time",
        ),
    ] {
        let out = validate(&[arg]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{arg}: {stderr}");
        assert!(stderr.contains(name), "{arg}: {stderr}");
    }
}

/// Upstream's binary has no subcommands: started with nothing, it runs. Here `run` starts and
/// stops at once for want of a cluster configuration (exit 2), which shows it was `run`.
#[test]
fn no_argument_starts_run() {
    let out = bin().output().expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no Kubernetes configuration"), "{stderr}");
    assert!(!stderr.contains("Usage"), "{stderr}");
}

#[test]
fn help_groups_the_flags_without_effect_and_the_unsupported_ones() {
    let out = bin().args(["run", "--help"]).output().expect("runs");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("Accepted without effect (upstream compatibility)"));
    assert!(help.contains("Accepted, not supported"));
    assert!(help.contains("--parallel-scale-up"));
    // Short help stays readable: the registry-only flags are left out of it.
    let out = bin().args(["run", "-h"]).output().expect("runs");
    let short = String::from_utf8_lossy(&out.stdout);
    assert!(!short.contains("--parallel-scale-up"), "{short}");
    assert!(short.contains("--scan-interval"));
}

/// `simulate` (like `plan`) takes `run`'s flags: a gap flag is said there too.
#[test]
fn simulate_says_a_gap_flag() {
    let out = bin()
        .args(["simulate", "--quiet", "--profiling"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: --profiling=true: there is no /debug/pprof endpoint"),
        "{stderr}"
    );
}
