"""Each kind of bad value is refused at render time with a message naming the field.

Schema errors come from values.schema.json, which Helm applies to the library's
values under the dependency's alias; they read
`hubFollower:\n- at '/restart/mode': value must be one of ...`. The checks the schema
cannot express (comparisons between fields, values rendered with tpl) fail in the
templates with `hubFollower.<field>: ...`.
"""

from __future__ import annotations

import helm_python as helm
import pytest

import chartkit
from chartkit import hf

SCHEMA_CASES = [
    # (id, values, field path in the message, words of the constraint)
    ("unknown-mode", hf(restart={"mode": "restart"}), "/restart/mode", "'signal', 'liveness', 'none'"),
    ("duration-words", hf(pollInterval="10 seconds"), "/pollInterval", "does not match pattern"),
    ("duration-no-unit", hf(probeTimeout="3"), "/probeTimeout", "does not match pattern"),
    ("duration-negative", hf(restart={"killAfter": "-5s"}), "/restart/killAfter", "does not match pattern"),
    ("duration-number", hf(restart={"cooldown": 60}), "/restart/cooldown", "want string"),
    ("duration-liveness", hf(restart={"livenessFailFor": "1.5m"}), "/restart/livenessFailFor", "pattern"),
    ("confirmations-zero", hf(confirmations=0), "/confirmations", "minimum"),
    ("confirmations-string", hf(confirmations="3"), "/confirmations", "want integer"),
    ("port-privileged", hf(port=80), "/port", "minimum"),
    ("port-string", hf(port="8095"), "/port", "want integer"),
    ("log-format", hf(logFormat="xml"), "/logFormat", "'json', 'text'"),
    ("log-level-word", hf(logLevel="verbose"), "/logLevel", "'error', 'warn', 'info', 'debug', 'trace'"),
    ("log-level-case", hf(logLevel="INFO"), "/logLevel", "one of"),
    ("log-level-directive", hf(logLevel="hub_follower=debug,info"), "/logLevel", "one of"),
    ("confirm-interval-no-unit", hf(confirmInterval="1"), "/confirmInterval", "does not match pattern"),
    ("confirm-interval-fraction", hf(confirmInterval="0.5s"), "/confirmInterval", "does not match pattern"),
    ("dead-hub-after-no-unit", hf(deadHubAfter="180"), "/deadHubAfter", "does not match pattern"),
    ("dead-hub-after-number", hf(deadHubAfter=180), "/deadHubAfter", "want string"),
    ("split-brain-window-words", hf(splitBrainWindow="5 minutes"), "/splitBrainWindow", "does not match pattern"),
    ("split-brain-window-negative", hf(splitBrainWindow="-5m"), "/splitBrainWindow", "does not match pattern"),
    ("default-after-fraction", hf(defaultAfter="0.5m"), "/defaultAfter", "does not match pattern"),
    ("default-after-number", hf(defaultAfter=30), "/defaultAfter", "want string"),
    ("watch-enabled-string", hf(watch={"enabled": "false"}), "/watch/enabled", "want boolean"),
    ("watch-timeout-number", hf(watch={"timeout": 290}), "/watch/timeout", "want string"),
    ("watch-timeout-words", hf(watch={"timeout": "290 seconds"}), "/watch/timeout", "does not match pattern"),
    ("watched-poll-no-unit", hf(watch={"watchedPollInterval": "120"}), "/watch/watchedPollInterval", "does not match pattern"),
    ("watched-poll-number", hf(watch={"watchedPollInterval": 120}), "/watch/watchedPollInterval", "want string"),
    ("watch-unknown-key", hf(watch={"enable": True}), "/watch", "'enable' not allowed"),
    ("pull-policy", hf(image={"pullPolicy": "Sometimes"}), "/image/pullPolicy", "one of"),
    ("digest", hf(image={"digest": "sha256:abc"}), "/image/digest", "does not match pattern"),
    ("tag-with-colon", hf(image={"tag": "v1:2"}), "/image/tag", "does not match pattern"),
    ("secondary-http", hf(secondary={"endpoint": "http://hub-2:6443"}), "/secondary/endpoint", "pattern"),
    ("secret-missing", hf(secondary={"secretName": ""}), "/secondary/secretName", "minLength"),
    ("secret-invalid", hf(secondary={"secretName": "Hub_Token"}), "/secondary/secretName", "pattern"),
    ("secondary-from-shape", hf(secondary={"endpointFrom": {"secretKeyRef": {"key": "endpoint"}}}), "/secondary/endpointFrom/secretKeyRef", "missing property 'name'"),
    ("controller-secret-not-base64", hf(secondary={"controllerSecret": {"token": "not base64!"}}), "/secondary/controllerSecret/token", "pattern"),
    ("controller-secret-unknown-key", hf(secondary={"controllerSecret": {"ca": "Y2E="}}), "/secondary/controllerSecret", "'ca' not allowed"),
    ("worker-container-invalid", hf(worker={"container": "Manager"}), "/worker/container", "pattern"),
    ("token-file-relative", hf(primary={"tokenFile": "token"}), "/primary/tokenFile", "pattern"),
    ("pod-monitor-interval", hf(metrics={"podMonitor": {"interval": "30 seconds"}}), "/metrics/podMonitor/interval", "pattern"),
    ("native-string", hf(nativeSidecar="yes"), "/nativeSidecar", "want null or boolean"),
    ("wrapper-string", hf(execWrapper="false"), "/execWrapper", "want boolean"),
    ("enabled-string", hf(enabled="true"), "/enabled", "want boolean"),
    ("worker-process-empty", hf(restart={"mode": "signal", "workerProcess": ""}), "/restart/workerProcess", "minLength"),
    ("worker-process-path", hf(restart={"workerProcess": "/manager"}), "/restart/workerProcess", "pattern"),
    ("worker-uid-negative", hf(restart={"workerUID": -1}), "/restart/workerUID", "minimum"),
    ("run-as-user-string", hf(securityContext={"runAsUser": "root"}), "/securityContext/runAsUser", "want"),
    ("signal-name", hf(restart={"signal": "TERM"}), "/restart/signal", "'SIGTERM'"),
    ("tls-server-name", hf(secondary={"tlsServerName": "https://hub-2"}), "/secondary/tlsServerName", "pattern"),
    ("endpoint-from-shape", hf(primary={"endpointFrom": {"secretKeyRef": {"name": "kubeslice-hub"}}}), "/primary/endpointFrom/secretKeyRef", "missing property 'key'"),
    ("threshold-zero", hf(restart={"livenessFailureThreshold": 0}), "/restart/livenessFailureThreshold", "minimum"),
    ("unknown-key", hf(restart={"mod": "signal"}), "/restart", "'mod' not allowed"),
    ("unknown-top-key", hf(pollIntervall="10s"), "hubFollower", "'pollIntervall' not allowed"),
    ("handoff-relative", hf(handoff={"dir": "var/run/hf"}), "/handoff/dir", "pattern"),
    ("resources-shape", hf(resources={"request": {"cpu": "1"}}), "/resources", "'request' not allowed"),
    ("runbook-url", hf(metrics={"prometheusRule": {"runbookBaseURL": "docs/helm.md"}}), "/metrics/prometheusRule/runbookBaseURL", "pattern"),
    ("events-enabled-string", hf(events={"enabled": "true"}), "/events/enabled", "want boolean"),
    ("events-rbac-number", hf(events={"rbac": {"create": 1}}), "/events/rbac/create", "want boolean"),
    ("events-rbac-unknown-key", hf(events={"rbac": {"enable": True}}), "/events/rbac", "'enable' not allowed"),
    ("dashboard-enabled-string", hf(dashboard={"enabled": "true"}), "/dashboard/enabled", "want boolean"),
    # `--set dashboard.labelValue=1` gives a number; --set-string gives the label value.
    ("dashboard-label-value-number", hf(dashboard={"labelValue": 1}), "/dashboard/labelValue", "want string"),
    ("dashboard-label-value-invalid", hf(dashboard={"labelValue": "yes please"}), "/dashboard/labelValue", "pattern"),
    ("dashboard-label-invalid", hf(dashboard={"label": "grafana dashboard"}), "/dashboard/label", "pattern"),
    ("dashboard-namespace-invalid", hf(dashboard={"namespace": "Monitoring"}), "/dashboard/namespace", "pattern"),
    ("dashboard-annotation-number", hf(dashboard={"annotations": {"grafana_folder": 1}}), "/dashboard/annotations/grafana_folder", "want string"),
    # restart.exitCode: 3 to 125, not 101. Refused in every mode, as the binary does.
    ("exit-code-zero", hf(restart={"mode": "restart-all", "exitCode": 0}), "/restart/exitCode", "minimum: got 0, want 3"),
    ("exit-code-one", hf(restart={"mode": "restart-all", "exitCode": 1}), "/restart/exitCode", "minimum: got 1, want 3"),
    ("exit-code-two", hf(restart={"exitCode": 2}), "/restart/exitCode", "minimum: got 2, want 3"),
    ("exit-code-panic", hf(restart={"mode": "restart-all", "exitCode": 101}), "/restart/exitCode", "got 101, want 100"),
    ("exit-code-126", hf(restart={"mode": "restart-all", "exitCode": 126}), "/restart/exitCode", "maximum: got 126, want 125"),
    ("exit-code-255", hf(restart={"exitCode": 255}), "/restart/exitCode", "maximum: got 255, want 125"),
    ("exit-code-string", hf(restart={"mode": "restart-all", "exitCode": "42"}), "/restart/exitCode", "got string, want integer"),
    ("exit-code-negative", hf(restart={"mode": "restart-all", "exitCode": -1}), "/restart/exitCode", "minimum: got -1, want 3"),
    ("exit-code-fraction", hf(restart={"mode": "restart-all", "exitCode": 42.5}), "/restart/exitCode", "want integer"),
    ("mode-restart-all-typo", hf(restart={"mode": "restartAll"}), "/restart/mode", "'restart-all'"),
]


@pytest.mark.parametrize("values,field,constraint", [c[1:] for c in SCHEMA_CASES], ids=[c[0] for c in SCHEMA_CASES])
def test_schema_rejects_bad_value_naming_the_field(chart, values, field, constraint):
    with pytest.raises(helm.HelmValuesError) as caught:
        chart.render(values, name=chartkit.RELEASE, namespace=chartkit.NAMESPACE)
    message = str(caught.value)
    assert "hubFollower" in message, message
    assert field in message, message
    assert constraint in message, message


def test_the_same_schema_check_runs_without_rendering(chart):
    # `chart.validate_schema` is what `helm install` runs before touching the cluster.
    with pytest.raises(helm.HelmValuesError, match="/restart/mode"):
        chart.validate_schema(chart.merge_values(hf(restart={"mode": "bounce"})))
    chart.validate_schema(chart.merge_values(hf(restart={"mode": "liveness"})))


TEMPLATE_CASES = [
    ("probe-not-shorter", hf(pollInterval="5s", probeTimeout="5s"), "hubFollower.probeTimeout", "shorter than hubFollower.pollInterval"),
    ("probe-zero", hf(probeTimeout="0s"), "hubFollower.probeTimeout", "longer than zero"),
    ("probe-longer", hf(pollInterval="2s", probeTimeout="2500ms"), "hubFollower.probeTimeout", '"2500ms" must be shorter than hubFollower.pollInterval ("2s")'),
    ("confirm-longer", hf(confirmInterval="11s"), "hubFollower.confirmInterval", '"11s" must not be longer than hubFollower.pollInterval ("10s")'),
    ("confirm-longer-mixed-units", hf(pollInterval="1m", probeTimeout="3s", confirmInterval="1m500ms"), "hubFollower.confirmInterval", "must not be longer than hubFollower.pollInterval"),
    ("confirm-above-short-poll", hf(pollInterval="800ms", probeTimeout="500ms"), "hubFollower.confirmInterval", '"1s" must not be longer than hubFollower.pollInterval ("800ms")'),
    ("confirm-zero", hf(confirmInterval="0ms"), "hubFollower.confirmInterval", "longer than zero"),
    ("watch-timeout-long", hf(watch={"timeout": "296s"}), "hubFollower.watch.timeout", "between 1s and 295s"),
    ("watch-timeout-hours", hf(watch={"timeout": "1h"}), "hubFollower.watch.timeout", "between 1s and 295s"),
    ("watch-timeout-short", hf(watch={"timeout": "999ms"}), "hubFollower.watch.timeout", "between 1s and 295s"),
    ("watch-timeout-off-too", hf(watch={"enabled": False, "timeout": "5m"}), "hubFollower.watch.timeout", "between 1s and 295s"),
    ("watched-poll-shorter", hf(watch={"watchedPollInterval": "5s"}), "hubFollower.watch.watchedPollInterval", '"5s" must not be shorter than hubFollower.pollInterval ("10s")'),
    ("watched-poll-below-long-poll", hf(pollInterval="3m"), "hubFollower.watch.watchedPollInterval", '"2m" must not be shorter than hubFollower.pollInterval ("3m")'),
    ("dead-hub-not-longer", hf(deadHubAfter="10s"), "hubFollower.deadHubAfter", '"10s" must be longer than hubFollower.pollInterval ("10s")'),
    ("dead-hub-zero", hf(deadHubAfter="0s"), "hubFollower.deadHubAfter", "must be longer than hubFollower.pollInterval"),
    ("dead-hub-below-long-poll", hf(pollInterval="3m", watch={"watchedPollInterval": "3m"}), "hubFollower.deadHubAfter", '"3m" must be longer than hubFollower.pollInterval ("3m")'),
    ("watched-poll-zero", hf(pollInterval="1s", probeTimeout="500ms", confirmInterval="1s", watch={"watchedPollInterval": "0s"}), "hubFollower.watch.watchedPollInterval", "longer than zero"),
    ("secret-without-endpoint", hf(secondary={"endpoint": ""}), "hubFollower.secondary.secretName", "hubFollower.secondary.endpoint is empty"),
    ("kill-after-zero", hf(restart={"killAfter": "0ms"}), "hubFollower.restart.killAfter", "longer than zero"),
    # The worker's own entries are the defaults; without them a value is required.
    ("cluster-missing", {"worker": {"clusterName": ""}}, "hubFollower.clusterName", "has no CLUSTER_NAME env entry"),
    ("namespace-not-in-worker", {"worker": {"projectNamespace": ""}}, "hubFollower.projectNamespace", "has no HUB_PROJECT_NAMESPACE env entry"),
    ("worker-cluster-invalid", {"worker": {"clusterName": "Worker_1"}}, "hubFollower.clusterName", "DNS-1123 subdomain"),
    ("cluster-uppercase", hf(clusterName="Worker_1"), "hubFollower.clusterName", "DNS-1123 subdomain"),
    ("namespace-missing", hf(projectNamespace="{{ .Values.nope }}"), "hubFollower.projectNamespace", "DNS-1123 label"),
    ("port-clash", hf(port=8081), "hubFollower.port", "already used by the worker"),
    ("primary-missing", {"worker": {"hubEndpoint": ""}}, "hubFollower.primary.endpoint", "has no HUB_HOST_ENDPOINT env entry"),
    ("primary-http", hf(primary={"endpoint": "http://hub-1:6443"}), "hubFollower.primary.endpoint", "https://"),
    ("worker-endpoint-http", {"worker": {"hubEndpoint": "http://hub-1:6443"}}, "hubFollower.primary.endpoint", "not an https:// URL"),
    ("primary-volume-unknown", hf(primary={"volumeName": "hub-secret"}), "hubFollower.primary.volumeName", 'the pod has no volume "hub-secret"'),
    ("primary-token-elsewhere", hf(primary={"tokenFile": "/etc/hub/token"}), "hubFollower.primary.volumeName", "mounts nothing that holds its HUB_TOKEN_FILE /etc/hub/token"),
    ("worker-container-unknown", hf(worker={"container": "operator"}), "hubFollower.worker.container", 'no Deployment or StatefulSet in the manifests has a container named "operator"'),
    ("wrapper-without-command", {"worker": {"command": None}}, "hubFollower.execWrapper", "has no `command` to wrap"),
    ("secondary-endpoint-twice", hf(secondary={"endpointFrom": {"secretKeyRef": {"name": "s", "key": "endpoint"}}}), "hubFollower.secondary.endpointFrom", "not both"),
    ("controller-secret-without-ca", hf(secondary={"controllerSecret": {"token": "dG9rZW4="}}), "hubFollower.secondary.controllerSecret", "`token` and `ca.crt`"),
    ("controller-secret-without-name", hf(secondary={"endpoint": "", "secretName": "", "controllerSecret": {"token": "dG9rZW4=", "ca.crt": "Y2E=", "endpoint": "aHR0cHM6Ly9odWItMg=="}}), "hubFollower.secondary.secretName", "name the Secret"),
    ("primary-template-empty", hf(primary={"endpoint": "{{ .Values.nope }}"}), "hubFollower.primary.endpoint", "https://"),
    ("same-hub-twice", hf(secondary={"endpoint": "https://hub-1.example.com:6443/"}), "hubFollower.secondary.endpoint", "same as"),
    ("uid-mismatch", hf(restart={"mode": "signal", "workerUID": 65532}, securityContext={"runAsUser": 1000}), "hubFollower.securityContext.runAsUser", "signal only processes of its own UID"),
    # The worker's own runAsUser is its UID, whatever restart.workerUID says.
    ("uid-mismatch-worker-own", {"worker": {"runAsUser": 1000}, "hubFollower": {"securityContext": {"runAsUser": 65532}}}, "hubFollower.securityContext.runAsUser", "differs from the worker's UID (1000"),
    ("root-outside-signal", hf(restart={"mode": "none"}, securityContext={"runAsUser": 0}), "hubFollower.securityContext.runAsUser", "only with hubFollower.restart.mode=signal"),
]


@pytest.mark.parametrize("values,field,reason", [c[1:] for c in TEMPLATE_CASES], ids=[c[0] for c in TEMPLATE_CASES])
def test_template_rejects_inconsistent_values_naming_the_field(chart, values, field, reason):
    # The schema passes these; the templates catch them.
    chart.validate_schema(chart.merge_values(values))
    message = chartkit.render_error(chart, values)
    assert field in message, message
    assert reason in message, message


@pytest.mark.parametrize(
    "values,field",
    [
        (hf(pollInterval="10 sec"), "hubFollower.pollInterval"),
        (hf(restart={"killAfter": "1.5m"}), "hubFollower.restart.killAfter"),
        (hf(exec={"wait": "2 minutes"}), "hubFollower.exec.wait"),
        (hf(restart={"mode": "liveness", "livenessFailFor": "90"}), "hubFollower.restart.livenessFailFor"),
        (hf(confirmInterval="1.5s"), "hubFollower.confirmInterval"),
        (hf(deadHubAfter="3 minutes"), "hubFollower.deadHubAfter"),
        (hf(splitBrainWindow="5"), "hubFollower.splitBrainWindow"),
        (hf(defaultAfter="0.5m"), "hubFollower.defaultAfter"),
        (hf(watch={"timeout": "290"}), "hubFollower.watch.timeout"),
    ],
)
def test_durations_are_checked_even_when_schema_validation_is_skipped(tmp_path, values, field):
    # `helm install --skip-schema-validation` still refuses a duration that the
    # binary (humantime) and the template could read differently.
    example = chartkit.prepare_charts(tmp_path, without_schema=True)
    with helm.Chart.load(example) as unchecked:
        assert unchecked.schema is None
        message = chartkit.render_error(unchecked, values)
    assert field in message and "is not a duration" in message, message


@pytest.mark.parametrize(
    "values,field,reason",
    [
        (hf(confirmInterval="15s"), "hubFollower.confirmInterval", "must not be longer than hubFollower.pollInterval"),
        (hf(pollInterval="3s"), "hubFollower.probeTimeout", "must be shorter than hubFollower.pollInterval"),
        (hf(deadHubAfter="5s"), "hubFollower.deadHubAfter", "must be longer than hubFollower.pollInterval"),
        (hf(watch={"timeout": "300s"}), "hubFollower.watch.timeout", "between 1s and 295s"),
        # A string would reach HUB_WATCH as something the binary may not read as meant.
        (hf(watch={"enabled": "yes"}), "hubFollower.watch.enabled", "must be true or false"),
        (hf(events={"enabled": "yes"}), "hubFollower.events.enabled", "must be true or false"),
    ],
)
def test_combinations_the_binary_refuses_fail_without_the_schema_too(tmp_path, values, field, reason):
    example = chartkit.prepare_charts(tmp_path, without_schema=True)
    with helm.Chart.load(example) as unchecked:
        message = chartkit.render_error(unchecked, values)
    assert field in message and reason in message, message


@pytest.fixture(scope="module")
def unchecked_chart(tmp_path_factory):
    """The example chart without the library's schema, as `--skip-schema-validation`
    renders it."""
    example = chartkit.prepare_charts(tmp_path_factory.mktemp("unchecked"), without_schema=True)
    with helm.Chart.load(example) as unchecked:
        yield unchecked


@pytest.mark.parametrize("code", [0, 1, 2, 101, 126, 255, "42", -1, 42.5, True], ids=repr)
@pytest.mark.parametrize("mode", ["restart-all", "signal"])
def test_exit_code_is_checked_by_the_templates_without_the_schema_too(unchecked_chart, mode, code):
    # The sidecar refuses these at start-up, and a code the sidecar or its runtime
    # exits with for another reason would restart the whole pod.
    values = hf(restart={"mode": mode, "exitCode": code})
    message = chartkit.render_error(unchecked_chart, values, kube_version=f"{chartkit.RESTART_ALL_K8S}.0")
    assert "hubFollower.restart.exitCode" in message, message
    assert "must be a whole number from 3 to 125 other than 101" in message, message


@pytest.mark.parametrize("code", [3, 100, 102, 125])
def test_exit_codes_at_the_bounds_reach_the_rule_and_the_env(chart, code):
    r = chartkit.render(chart, hf(restart={"mode": "restart-all", "exitCode": code}), kube_version=f"{chartkit.RESTART_ALL_K8S}.0")
    assert r.sidecar["restartPolicyRules"][0]["exitCodes"]["values"] == [code]
    assert chartkit.env(r.sidecar)["HUB_RESTART_EXIT_CODE"] == str(code)
    chartkit.validate_k8s(r.deployment, chartkit.RESTART_ALL_K8S)


@pytest.mark.parametrize(
    "values",
    [
        hf(confirmInterval="10s"),  # equal to pollInterval
        hf(pollInterval="1m", confirmInterval="1m"),
        hf(pollInterval="2s", probeTimeout="1999ms", confirmInterval="500ms"),
        hf(pollInterval="5s", probeTimeout="4s", confirmInterval="100ms"),  # shorter than the probe timeout: allowed
        hf(watch={"timeout": "1s"}),
        hf(watch={"timeout": "295s"}),
        hf(watch={"timeout": "4m55s"}),
        hf(watch={"enabled": False}),
        hf(deadHubAfter="10001ms"),  # just longer than pollInterval
        hf(splitBrainWindow="0s", defaultAfter="0s"),  # no limit; at once
    ],
    ids=["confirm-equals-poll", "minute-poll", "ms-units", "confirm-below-probe", "watch-1s", "watch-295s", "watch-4m55s", "watch-off",
         "dead-hub-just-above-poll", "split-brain-and-default-zero"],
)
def test_boundary_values_the_binary_accepts_render(chart, values):
    r = chartkit.render(chart, values)
    chartkit.validate_k8s(r.deployment)


def test_dependency_without_the_alias_is_refused(tmp_path):
    example = chartkit.prepare_charts(tmp_path)
    chart_yaml = example / "Chart.yaml"
    chart_yaml.write_text(chart_yaml.read_text().replace("alias: hubFollower", ""))
    with helm.Chart.load(example) as unaliased:
        message = chartkit.render_error(unaliased, {})
    assert "alias: hubFollower" in message
