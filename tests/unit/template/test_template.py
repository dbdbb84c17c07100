"""template.yaml as deployed: the raw SAM template and its SAM-transformed CloudFormation (what CloudFormation
creates). Each test pins a concrete property from issue 5 so that a regression fails ``make test``."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import pytest

from omnireel_template import ROOT, function_folders, load_template, placeholder_code, sam_transform

PINNED_IMAGE = "${Account}.dkr.ecr.${AWS::Region}.${AWS::URLSuffix}/vllm:omni-sagemaker-cuda-v1.6"
POOLS = ["ml.g6.xlarge", "ml.g6e.xlarge", "ml.g5.xlarge", "ml.g4dn.xlarge"]
# FLUX.2-klein-4B + its Qwen3-4B text encoder (~16 GB bf16) does not fit the 16 GB T4 of ml.g4dn (issue 16 item 6).
IMAGE_POOLS = ["ml.g6.xlarge", "ml.g6e.xlarge", "ml.g5.xlarge"]
# Event sources whose service invokes Lambda asynchronously (so failures need an on-failure destination).
ASYNC_EVENT_TYPES = {"S3", "SNS", "EventBridgeRule", "Schedule", "ScheduleV2", "CloudWatchEvent"}
FUNCTION_FOLDERS = function_folders()


@pytest.fixture(scope="module")
def sam() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="module")
def cfn(sam: dict[str, Any]) -> dict[str, Any]:
    return sam_transform(placeholder_code(sam, "placeholder")[0], "omnireel-test")


def of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def props(template: dict[str, Any], logical: str) -> dict[str, Any]:
    return template["Resources"][logical]["Properties"]


# ---------------------------------------------------------------- 1. one pinned image, env per model
def test_every_model_uses_the_same_pinned_image_expression(cfn: dict[str, Any]) -> None:
    models = of_type(cfn, "AWS::SageMaker::Model")
    assert set(models) == {"ImageModel", "VideoModel", "TtsModel"}
    images = [m["Properties"]["PrimaryContainer"]["Image"] for m in models.values()]
    assert all(image == images[0] for image in images)
    condition, pinned, override = images[0]["Fn::If"]
    assert condition == "UsePinnedDlcImage"
    assert pinned["Fn::Sub"][0] == PINNED_IMAGE
    assert pinned["Fn::Sub"][1] == {"Account": {"Fn::FindInMap": ["DlcRegistry", {"Ref": "AWS::Region"}, "Account"]}}
    assert override == {"Ref": "DlcImageUri"}
    assert cfn["Conditions"]["UsePinnedDlcImage"] == {"Fn::Equals": [{"Ref": "DlcImageUri"}, ""]}
    assert cfn["Mappings"]["DlcRegistry"]["us-east-1"]["Account"] == "763104351884"


def test_model_environment_differs_only_in_model_and_video_tiling(cfn: dict[str, Any]) -> None:
    env = {
        name: props(cfn, name)["PrimaryContainer"]["Environment"] for name in ("ImageModel", "VideoModel", "TtsModel")
    }
    assert env["ImageModel"] == {"SM_VLLM_MODEL": {"Ref": "ImageModelId"}}
    assert env["VideoModel"] == {"SM_VLLM_MODEL": {"Ref": "VideoModelId"}, "SM_VLLM_VAE_USE_TILING": "true"}
    assert env["TtsModel"] == {"SM_VLLM_MODEL": {"Ref": "TtsModelId"}}
    params = cfn["Parameters"]
    assert params["ImageModelId"]["Default"] == "black-forest-labs/FLUX.2-klein-4B"
    assert params["VideoModelId"]["Default"] == "Wan-AI/Wan2.1-VACE-1.3B-diffusers"
    assert params["TtsModelId"]["Default"] == "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"


# ---------------------------------------------------------------- 2. instance pools
@pytest.mark.parametrize(
    ("config", "kind", "defaults"), [("ImageEndpointConfig", "Image", IMAGE_POOLS), ("TtsEndpointConfig", "Tts", POOLS)]
)
def test_realtime_endpoints_have_their_own_instance_pools_in_priority_order(
    cfn: dict[str, Any], config: str, kind: str, defaults: list[str]
) -> None:
    assert cfn["Parameters"][f"{kind}InstanceTypes"]["Default"].split(",") == defaults
    (variant,) = props(cfn, config)["ProductionVariants"]
    # One type: InstanceType and no pools; two to four: pools only (issue 27 item 3).
    first = {"Fn::Select": [0, {"Ref": f"{kind}InstanceTypes"}]}
    assert variant["InstanceType"] == {"Fn::If": [f"Has{kind}Pool2", {"Ref": "AWS::NoValue"}, first]}
    condition, pools, absent = variant["InstancePools"]["Fn::If"]
    assert (condition, absent) == (f"Has{kind}Pool2", {"Ref": "AWS::NoValue"})
    assert pools[0] == {"InstanceType": first, "Priority": 1}
    assert pools[1]["Priority"] == 2 and pools[1]["InstanceType"]["Fn::Select"][0] == 1  # present whenever pools are
    for index, entry in enumerate(pools[2:], start=2):
        condition, pool, absent = entry["Fn::If"]
        assert condition == f"Has{kind}Pool{index + 1}"
        assert kind in str(cfn["Conditions"][condition])
        assert pool["Priority"] == index + 1
        assert pool["InstanceType"]["Fn::Select"][0] == index
        assert absent == {"Ref": "AWS::NoValue"}
    assert len(pools) == 4
    assert variant["VariantInstanceProvisionTimeoutInSeconds"] == 1200
    assert variant["InferenceAmiVersion"] == {"Ref": "InferenceAmiVersion"}
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] >= 1800
    assert variant["ModelDataDownloadTimeoutInSeconds"] >= 1800


def test_video_endpoint_has_one_fixed_instance_type(cfn: dict[str, Any]) -> None:
    (variant,) = props(cfn, "VideoEndpointConfig")["ProductionVariants"]
    assert variant["InstanceType"] == {"Ref": "VideoInstanceType"}
    assert "InstancePools" not in variant
    assert cfn["Parameters"]["VideoInstanceType"]["Default"] == "ml.g6e.xlarge"
    assert cfn["Parameters"]["InferenceAmiVersion"]["Default"] == "al2023-ami-sagemaker-inference-gpu-4-1"


# ---------------------------------------------------------------- async config
def test_async_config_writes_under_the_artifacts_bucket_and_notifies_both_topics(cfn: dict[str, Any]) -> None:
    config = props(cfn, "VideoEndpointConfig")["AsyncInferenceConfig"]
    assert config["ClientConfig"] == {
        "MaxConcurrentInvocationsPerInstance": {"Ref": "VideoMaxConcurrentInvocationsPerInstance"}
    }
    output = config["OutputConfig"]
    assert output["S3OutputPath"] == {"Fn::Sub": "s3://${ArtifactsBucket}/async/outputs/"}
    assert output["S3FailurePath"] == {"Fn::Sub": "s3://${ArtifactsBucket}/async/failures/"}
    assert output["NotificationConfig"] == {
        "SuccessTopic": {"Ref": "VideoSuccessTopic"},
        "ErrorTopic": {"Ref": "VideoErrorTopic"},
    }


def test_sagemaker_role_may_publish_to_both_notification_topics(cfn: dict[str, Any]) -> None:
    statements = props(cfn, "SageMakerExecutionRole")["Policies"][0]["PolicyDocument"]["Statement"]
    publish = [s for s in statements if s["Action"] == "sns:Publish"]
    assert publish and publish[0]["Resource"] == [{"Ref": "VideoSuccessTopic"}, {"Ref": "VideoErrorTopic"}]


# ---------------------------------------------------------------- 3. scale to zero
def test_video_scalable_target_scales_to_zero_by_default(cfn: dict[str, Any]) -> None:
    target = props(cfn, "VideoScalableTarget")
    assert target["ServiceNamespace"] == "sagemaker"
    assert target["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert target["ResourceId"] == {"Fn::Sub": "endpoint/${VideoEndpoint.EndpointName}/variant/AllTraffic"}
    assert target["MinCapacity"] == {"Ref": "VideoMinCapacity"}
    assert target["MaxCapacity"] == {"Ref": "VideoMaxCapacity"}
    assert cfn["Parameters"]["VideoMinCapacity"]["Default"] == 0


def test_target_tracking_on_backlog_per_instance(cfn: dict[str, Any]) -> None:
    policy = props(cfn, "VideoBacklogScalingPolicy")
    assert policy["PolicyType"] == "TargetTrackingScaling"
    assert policy["ScalingTargetId"] == {"Ref": "VideoScalableTarget"}
    config = policy["TargetTrackingScalingPolicyConfiguration"]
    metric = config["CustomizedMetricSpecification"]
    assert (metric["Namespace"], metric["MetricName"], metric["Statistic"]) == (
        "AWS/SageMaker",
        "ApproximateBacklogSizePerInstance",
        "Average",
    )
    assert metric["Dimensions"] == [
        {"Name": "EndpointName", "Value": {"Fn::GetAtt": ["VideoEndpoint", "EndpointName"]}}
    ]
    assert config["TargetValue"] == {"Ref": "VideoBacklogTargetPerInstance"}
    assert cfn["Parameters"]["VideoBacklogTargetPerInstance"]["Default"] == 3
    assert config["ScaleOutCooldown"] == 60


def test_has_backlog_without_capacity_alarm_wakes_the_endpoint(cfn: dict[str, Any]) -> None:
    step = props(cfn, "VideoWakeUpScalingPolicy")
    assert step["PolicyType"] == "StepScaling"
    assert step["ScalingTargetId"] == {"Ref": "VideoScalableTarget"}
    config = step["StepScalingPolicyConfiguration"]
    assert config["AdjustmentType"] == "ChangeInCapacity"
    assert config["StepAdjustments"] == [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}]
    alarm_resource = cfn["Resources"]["VideoHasBacklogWithoutCapacityAlarm"]
    assert "Condition" not in alarm_resource, "the wake-up alarm drives scaling: it must exist even without alarms"
    alarm = alarm_resource["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SageMaker", "HasBacklogWithoutCapacity")
    assert alarm["Period"] <= 60
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert alarm["AlarmActions"] == [{"Ref": "VideoWakeUpScalingPolicy"}]


def test_pipeline_timeouts_cover_a_wake_up_from_zero(cfn: dict[str, Any]) -> None:
    p = {k: v.get("Default") for k, v in cfn["Parameters"].items()}
    wake_up = 15 * 60  # generous: documented as about 10 minutes
    assert p["VideoRequestTtlSeconds"] == 3600 and p["VideoRequestTtlSeconds"] > wake_up
    assert p["VideoHeartbeatSeconds"] > p["VideoRequestTtlSeconds"] + p["VideoInvocationTimeoutSeconds"]
    assert p["VideoCallbackTimeoutSeconds"] >= p["VideoHeartbeatSeconds"]
    # On AWS the first heartbeat interval starts with the task, so it also covers InvokeVideo's own run (token stored,
    # InvokeEndpointAsync) before its Lambda heartbeats once the render is queued; the image is a state of its own.
    invoke_step = props(cfn, "InvokeVideoFunction")["Timeout"]
    assert p["VideoHeartbeatSeconds"] > p["VideoRequestTtlSeconds"] + p["VideoInvocationTimeoutSeconds"] + invoke_step


def test_each_pipeline_state_runs_its_own_function_within_its_timeout(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    """Issue 26: GenerateImage and InvokeVideo are separate states backed by separate functions; a synchronous task's
    TimeoutSeconds covers its function's Timeout (so a slow attempt ends as the Lambda's error, not the state's)."""
    from omnireel_template import definition_file, render_definition, state_machine_substitutions

    parameters = {k: str(v.get("Default", "")) for k, v in sam["Parameters"].items()}
    subs = state_machine_substitutions(sam, "PipelineStateMachine", lambda value: f"arn:{value}", parameters)
    states = render_definition(definition_file(sam, "PipelineStateMachine").read_text(), subs)["States"]
    functions = {
        "GenerateImage": "GenerateImageFunction",
        "InvokeVideo": "InvokeVideoFunction",
    }
    for state, function in functions.items():
        target = states[state]["Parameters"]["FunctionName"]
        assert [name for name in functions.values() if f"'{name}" in target] == [function], (state, target)
    image_timeout = props(cfn, "GenerateImageFunction")["Timeout"]
    assert states["GenerateImage"]["TimeoutSeconds"] >= image_timeout


# ---------------------------------------------------------------- 5. lifecycle
def test_artifacts_bucket_lifecycle_rules(cfn: dict[str, Any]) -> None:
    rules = {r["Prefix"]: r for r in props(cfn, "ArtifactsBucket")["LifecycleConfiguration"]["Rules"]}
    assert set(rules) == {"jobs/", "async/outputs/", "async/failures/"}
    assert rules["jobs/"]["ExpirationInDays"] == {"Ref": "JobArtifactDays"}
    assert rules["async/outputs/"]["ExpirationInDays"] == {"Ref": "AsyncOutputDays"}
    assert rules["async/failures/"]["ExpirationInDays"] == {"Ref": "AsyncFailureDays"}
    for rule in rules.values():
        assert rule["Status"] == "Enabled"
        assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}


def test_inbox_bucket_is_versioned_and_expires_every_version(cfn: dict[str, Any]) -> None:
    inbox = props(cfn, "InboxBucket")
    assert inbox["VersioningConfiguration"] == {"Status": "Enabled"}
    rules = {r["Id"]: r for r in inbox["LifecycleConfiguration"]["Rules"]}
    assert set(rules) == {"expire-prompts", "remove-expired-delete-markers"}
    prompts = rules["expire-prompts"]
    assert (prompts["Prefix"], prompts["ExpirationInDays"]) == ("prompts/", {"Ref": "InboxPromptDays"})
    assert prompts["NoncurrentVersionExpiration"] == {"NoncurrentDays": {"Ref": "InboxPromptDays"}}
    assert rules["remove-expired-delete-markers"]["ExpiredObjectDeleteMarker"] is True
    assert all(r["Status"] == "Enabled" and r["Prefix"] == "prompts/" for r in rules.values())


def test_inbox_function_reads_and_tags_exact_versions_under_prompts_only(cfn: dict[str, Any]) -> None:
    role = next(n for n, r in of_type(cfn, "AWS::IAM::Role").items() if n.startswith("InboxFunction"))
    s3 = [s for r, s in _identity_statements(cfn) if r == role and any("s3:" in a for a in s["Action"])]
    assert [sorted(s["Action"]) for s in s3] == [["s3:GetObjectVersion", "s3:PutObjectVersionTagging"]]
    resource = s3[0]["Resource"]["Fn::Sub"]
    assert resource.endswith("-inbox-${AWS::AccountId}-${AWS::Region}/prompts/*"), resource


# ---------------------------------------------------------------- 6. observability
def test_alarms_cover_pipeline_dlq_backlog_endpoints_and_relay(cfn: dict[str, Any]) -> None:
    alarms = {
        (a["Properties"].get("Namespace"), a["Properties"].get("MetricName")): a  # metric math alarms: neither
        for a in of_type(cfn, "AWS::CloudWatch::Alarm").values()
    }
    expected = {
        ("AWS/States", "ExecutionsFailed"),
        ("AWS/States", "ExecutionsTimedOut"),
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible"),
        ("AWS/SageMaker", "ApproximateAgeOfOldestRequest"),
        ("AWS/SageMaker", "Invocation5XXErrors"),
        ("AWS/SageMaker", "InvocationFailures"),
        ("AWS/ApplicationELB", "UnHealthyHostCount"),
        ("AWS/ApplicationELB", "HTTPCode_Target_5XX_Count"),
    }
    assert expected <= set(alarms)
    for key in expected:
        assert alarms[key]["Condition"] in {"AlarmsEnabled", "VoiceAlarmsEnabled"}
        assert alarms[key]["Properties"]["AlarmActions"] == [{"Ref": "AlarmTopic"}]
    five_xx = [
        a
        for a in of_type(cfn, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "Invocation5XXErrors"
    ]
    endpoints = {a["Properties"]["Dimensions"][0]["Value"]["Fn::GetAtt"][0] for a in five_xx}
    assert endpoints == {"ImageEndpoint", "TtsEndpoint"}
    assert len(of_type(cfn, "AWS::CloudWatch::Dashboard")) == 1


def test_tracing_is_on_for_functions_and_state_machine(cfn: dict[str, Any]) -> None:
    functions = of_type(cfn, "AWS::Lambda::Function")
    assert len(functions) == len(FUNCTION_FOLDERS)
    for name, fn in functions.items():
        assert fn["Properties"]["TracingConfig"] == {"Mode": "Active"}, name
    (machine,) = of_type(cfn, "AWS::StepFunctions::StateMachine").values()
    assert machine["Properties"]["TracingConfiguration"] == {"Enabled": True}
    env = load_template()["Globals"]["Function"]["Environment"]["Variables"]
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "omnireel"


def test_every_function_logs_to_its_own_group_with_retention(cfn: dict[str, Any]) -> None:
    for name, fn in of_type(cfn, "AWS::Lambda::Function").items():
        group = fn["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert cfn["Resources"][group]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, name


def async_invoked(sam: dict[str, Any]) -> set[str]:
    """Functions invoked asynchronously, derived from their event sources (a new one cannot skip the check)."""
    return {
        name
        for name, resource in sam["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
        and any(e["Type"] in ASYNC_EVENT_TYPES for e in (resource["Properties"].get("Events") or {}).values())
    }


def test_async_invoked_functions_have_an_on_failure_destination(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    configs = {
        c["Properties"]["FunctionName"]["Ref"]: c["Properties"]
        for c in of_type(cfn, "AWS::Lambda::EventInvokeConfig").values()
    }
    wanted = async_invoked(sam)
    assert wanted >= {"InboxFunction", "AsyncResultFunction", "WorkflowEndedFunction", "FailOverdueJobsFunction"}
    assert set(configs) >= wanted
    for name in wanted:
        on_failure = configs[name]["DestinationConfig"]["OnFailure"]
        assert on_failure["Destination"] == {"Fn::GetAtt": ["FailedInvocationsQueue", "Arn"]}, name


def test_default_video_steps_reaches_the_entry_points(cfn: dict[str, Any]) -> None:
    assert cfn["Parameters"]["DefaultVideoSteps"]["Default"] == 30
    for name in ("ApiFunction", "InboxFunction"):
        env = props(cfn, name)["Environment"]["Variables"]
        assert env["DEFAULT_VIDEO_STEPS"] == {"Ref": "DefaultVideoSteps"}, name


# ---------------------------------------------------------------- 7. security
def test_encryption_everywhere(cfn: dict[str, Any]) -> None:
    for name, bucket in of_type(cfn, "AWS::S3::Bucket").items():
        p = bucket["Properties"]
        (rule,) = p["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}, name
        assert all(p["PublicAccessBlockConfiguration"][k] is True for k in (
            "BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"))  # fmt: skip
    for name, topic in of_type(cfn, "AWS::SNS::Topic").items():
        assert topic["Properties"].get("KmsMasterKeyId"), name
    for name, queue in of_type(cfn, "AWS::SQS::Queue").items():
        assert queue["Properties"].get("SqsManagedSseEnabled") or queue["Properties"].get("KmsMasterKeyId"), name
    for name, table in of_type(cfn, "AWS::DynamoDB::Table").items():
        assert table["Properties"]["SSESpecification"]["SSEEnabled"] is True, name
    assert props(cfn, "AlarmTopicKey")["EnableKeyRotation"] is True


def test_buckets_deny_insecure_transport(cfn: dict[str, Any]) -> None:
    policies = {
        p["Properties"]["Bucket"]["Ref"]: p["Properties"] for p in of_type(cfn, "AWS::S3::BucketPolicy").values()
    }
    assert set(policies) == set(of_type(cfn, "AWS::S3::Bucket"))
    for bucket, policy in policies.items():
        (deny,) = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}, bucket


def test_api_uses_iam_auth(sam: dict[str, Any]) -> None:
    auth = props(sam, "HttpApi")["Auth"]
    assert auth["DefaultAuthorizer"] == "AWS_IAM"


def _identity_statements(cfn: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for name, role in of_type(cfn, "AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            found += [(name, s) for s in policy["PolicyDocument"]["Statement"]]
    return found


def test_no_iam_statement_allows_a_wildcard_action(cfn: dict[str, Any]) -> None:
    statements = _identity_statements(cfn)
    assert len(statements) > 20
    for role, statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        for action in actions:
            assert "*" not in action, f"{role}: {action}"
    # SAM attaches exactly these two AWS-managed policies (logs and X-Ray writes; no wildcard actions); nothing broader.
    sam_defaults = {
        "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
        "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
    }
    for name, role in of_type(cfn, "AWS::IAM::Role").items():
        managed = {
            arn if isinstance(arn, str) else arn.get("Fn::Sub", "")
            for arn in role["Properties"].get("ManagedPolicyArns", [])
        }
        assert managed <= sam_defaults, f"{name}: {managed - sam_defaults}"


def test_star_resources_only_where_aws_requires_them(cfn: dict[str, Any]) -> None:
    allowed = {
        "ecr:GetAuthorizationToken",
        "states:SendTaskHeartbeat",
        "states:SendTaskSuccess",
        "states:SendTaskFailure",
        "cloudwatch:PutMetricData",
        "logs:CreateLogDelivery",  # Step Functions log delivery: account-level actions
        "logs:GetLogDelivery",
        "logs:UpdateLogDelivery",
        "logs:DeleteLogDelivery",
        "logs:ListLogDeliveries",
        "logs:PutResourcePolicy",
        "logs:DescribeResourcePolicies",
        "logs:DescribeLogGroups",
        "xray:PutTraceSegments",  # SAM's Tracing: Active
        "xray:PutTelemetryRecords",
        "xray:GetSamplingRules",
        "xray:GetSamplingTargets",
        "xray:GetSamplingStatisticSummaries",
    }
    for role, statement in _identity_statements(cfn):
        if statement.get("Resource") == "*" and statement["Effect"] == "Allow":
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert set(actions) <= allowed, f"{role}: {actions}"


def test_checkov_waivers_carry_a_reason(sam: dict[str, Any]) -> None:
    waived = 0
    for name, resource in sam["Resources"].items():
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", []):
            assert re.fullmatch(r"CKV2?_AWS_\d+", skip["id"]), name
            assert len(skip["comment"]) > 20, f"{name} {skip['id']}: give a reason"
            waived += 1
    assert waived > 0


# ---------------------------------------------------------------- 4. profiles
def test_samconfig_profiles() -> None:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())

    def overrides(env: str) -> dict[str, str]:
        return dict(item.split("=", 1) for item in config[env]["deploy"]["parameters"]["parameter_overrides"])

    for env in ("dev", "prod"):
        deploy = config[env]["deploy"]["parameters"]
        assert deploy["capabilities"] == "CAPABILITY_IAM"
        assert deploy["resolve_s3"] is True
        assert deploy["stack_name"] == deploy["stack_name"].lower()
        names = set(load_template()["Parameters"])
        assert set(overrides(env)) <= names, f"{env}: unknown parameter"
    dev, prod = overrides("dev"), overrides("prod")
    assert (dev["DefaultVideoSteps"], dev["VideoMinCapacity"], dev["EnableAlarms"]) == ("4", "0", "false")
    assert (prod["DefaultVideoSteps"], prod["EnableAlarms"]) == ("30", "true")
    assert int(dev["LogRetentionDays"]) < int(prod["LogRetentionDays"])


def test_destroy_is_not_part_of_make_test() -> None:
    makefile = (ROOT / "Makefile").read_text()
    graph = {m[1]: m[2].split() for m in re.finditer(r"^([a-z-]+):([^=\n#]*)", makefile, re.M)}
    # ... and the targets a recipe runs through a sub-make (`make test` runs the lint gate as `$(MAKE) ... lint &`)
    for rule in re.finditer(r"^([a-z-]+):(?!=)[^\n]*\n((?:\t.*\n?)*)", makefile, re.M):
        for call in re.finditer(r"\$\(MAKE\)([^;&|>]*)", rule[2]):
            graph[rule[1]] += [word for word in call[1].split() if not word.startswith("-")]
    seen, todo = set(), ["test"]
    while todo:
        target = todo.pop()
        if target in seen:
            continue
        seen.add(target)
        todo += [d for d in graph.get(target, []) if d in graph]
    assert "checkov" in seen
    assert "destroy" not in seen and "smoke" not in seen


def test_docs_state_that_four_steps_lose_the_composition() -> None:
    profiles = (ROOT / "docs" / "operations" / "deploy.md").read_text()
    assert "4 steps does not keep the reference image's composition" in profiles
    quotas = (ROOT / "docs" / "operations" / "quotas.md").read_text()
    for quota in [*POOLS, "ml.g6e.xlarge"]:
        assert f"{quota} for endpoint usage" in quotas


def test_every_ended_execution_reaches_the_safety_net(sam: dict[str, Any]) -> None:
    event = sam["Resources"]["WorkflowEndedFunction"]["Properties"]["Events"]["ExecutionEnded"]
    assert event["Type"] == "EventBridgeRule"
    pattern = event["Properties"]["Pattern"]
    assert pattern["source"] == ["aws.states"]
    assert set(pattern["detail"]["status"]) == {"FAILED", "TIMED_OUT", "ABORTED"}
    assert pattern["detail"]["stateMachineArn"] == [{"Ref": "PipelineStateMachine"}]
    assert event["Properties"]["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["FailedInvocationsQueue", "Arn"]}}


# ---------------------------------------------------------------- the job deadline (issue 9, defect 2)
def longest_execution_s(template: dict[str, Any], parameters: dict[str, str]) -> float:
    """An upper bound of how long one execution can run: each task state's TimeoutSeconds times its attempts (1 + every
    retrier's MaxAttempts) plus the retry waits. The ASL has no loop, so a path visits each state at most once."""
    from omnireel_template import definition_file, render_definition, state_machine_substitutions

    subs = state_machine_substitutions(template, "PipelineStateMachine", lambda _: "arn:function", parameters)
    states = render_definition(definition_file(template, "PipelineStateMachine").read_text(), subs)["States"]
    from omnireel.admission.gate import REQUEUE_SECONDS

    total = 0.0
    for name, state in states.items():
        if state["Type"] in ("Succeed", "Fail", "Pass", "Choice"):
            continue
        assert state["Type"] == "Task", f"{name}: extend longest_execution_s for {state['Type']} states"
        retries = state.get("Retry", [])
        attempts = 1 + sum(r.get("MaxAttempts", 3) for r in retries)
        waits = sum(
            r.get("IntervalSeconds", 1) * r.get("BackoffRate", 2.0) ** k
            for r in retries
            for k in range(r.get("MaxAttempts", 3))
        )
        if name.startswith("WaitFor"):
            # Admission's waits (issue 34): a retry of one re-invokes its Lambda (seconds), which failed before the
            # wait began, so the wait itself counts once. The deadline counts from the first admission: the first
            # image wait (max_queue_seconds) is outside it, and each later attempt of GenerateImage may wait again,
            # at most REQUEUE_SECONDS (its TimeoutSecondsPath). InvokeVideo keeps its slot across retries: one wait.
            guarded = states[state["Next"]]
            again = sum(r.get("MaxAttempts", 3) for r in guarded.get("Retry", []))
            wait = REQUEUE_SECONDS * again if "TimeoutSecondsPath" in state else state["TimeoutSeconds"]
            total += wait + _LAMBDA_TIMEOUT_S * (attempts - 1) + waits
            continue
        total += state["TimeoutSeconds"] * attempts + waits
    return total


_LAMBDA_TIMEOUT_S = 60  # Globals.Function.Timeout (wait_for_slot's)


@pytest.mark.parametrize("where", ["aws", "local"])
def test_job_deadline_outlasts_the_longest_execution(sam: dict[str, Any], where: str) -> None:
    from omnireel_local.provision import LOCAL_PARAMETERS

    parameters = {k: str(v.get("Default", "")) for k, v in sam["Parameters"].items()}
    if where == "local":
        parameters |= LOCAL_PARAMETERS
    assert int(parameters["JobDeadlineSeconds"]) > longest_execution_s(sam, parameters)


def test_open_jobs_index_is_sparse_and_the_sweeper_may_only_query_it(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    from omnireel.aws.job_store import OPEN_JOBS_INDEX

    table = props(cfn, "JobsTable")
    (index,) = [i for i in table["GlobalSecondaryIndexes"] if i["IndexName"] == OPEN_JOBS_INDEX]
    assert index["KeySchema"] == [
        {"AttributeName": "open_shard", "KeyType": "HASH"},
        {"AttributeName": "created_at", "KeyType": "RANGE"},
    ]
    assert index["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    statements = [
        s
        for policy in props(cfn, "FailOverdueJobsFunctionRole")["Policies"]
        for s in policy["PolicyDocument"]["Statement"]
    ]
    queries = [s for s in statements if "dynamodb:Query" in _actions(s)]
    resources = [r for q in queries for r in (q["Resource"] if isinstance(q["Resource"], list) else [q["Resource"]])]
    # The jobs table only through its sparse indexes: the open jobs, and (issue 34: the pending counters' heal) each
    # caller's open counted jobs; the usage table only through its index of callers with a counter.
    assert sorted(str(r) for r in resources) == sorted(
        str({"Fn::Sub": f"${{{table}.Arn}}/index/{index}"})
        for table, index in (("JobsTable", "open-jobs"), ("JobsTable", "caller-open-jobs"),
                             ("UsageTable", "pending-counters"))
    )  # fmt: skip
    assert not any("dynamodb:Scan" in _actions(s) for s in statements)
    env = props(cfn, "FailOverdueJobsFunction")["Environment"]["Variables"]
    assert env["JOB_DEADLINE_SECONDS"] == {"Ref": "JobDeadlineSeconds"}
    (rule,) = [
        r
        for r in of_type(cfn, "AWS::Events::Rule").values()
        if "ScheduleExpression" in r["Properties"]
        and r["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": ["FailOverdueJobsFunction", "Arn"]}
    ]
    assert rule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"


def test_listing_reads_only_the_owner_index_and_never_scans(cfn: dict[str, Any]) -> None:
    from omnireel.aws.job_store import OWNER_JOBS_INDEX

    (index,) = [i for i in props(cfn, "JobsTable")["GlobalSecondaryIndexes"] if i["IndexName"] == OWNER_JOBS_INDEX]
    assert index["KeySchema"] == [
        {"AttributeName": "owner", "KeyType": "HASH"},
        {"AttributeName": "created_at", "KeyType": "RANGE"},
    ]
    statements = [
        s for policy in props(cfn, "ApiFunctionRole")["Policies"] for s in policy["PolicyDocument"]["Statement"]
    ]
    queries = [s for s in statements if "dynamodb:Query" in _actions(s)]
    on_jobs = [q["Resource"] for q in queries if "JobsTable" in str(q["Resource"])]
    assert on_jobs == [{"Fn::Sub": "${JobsTable.Arn}/index/owner-jobs"}]  # other tables: their own tests
    assert not any("dynamodb:Scan" in _actions(s) for s in statements)
    (stop,) = [s for s in statements if "states:StopExecution" in _actions(s)]
    assert ":execution:${PipelineStateMachine.Name}:*" in stop["Resource"]["Fn::Sub"]


def test_webhook_retries_last_over_a_day_then_reach_the_dead_letter_queue(
    sam: dict[str, Any], cfn: dict[str, Any]
) -> None:
    from omnireel.webhooks.delivery import retry_span_s

    queue = props(cfn, "WebhookQueue")
    attempts = queue["RedrivePolicy"]["maxReceiveCount"]
    env = props(cfn, "WebhookDeliveryFunction")["Environment"]["Variables"]
    assert int(env["WEBHOOK_MAX_ATTEMPTS"]) == attempts
    base = int(sam["Parameters"]["WebhookRetryBaseSeconds"]["Default"])
    span = retry_span_s(base, attempts)
    assert span >= 86400, "webhook retries must last at least 24 hours"
    assert queue["MessageRetentionPeriod"] > span + 3600, "the queue must keep a message through its whole schedule"
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["WebhookDeadLetterQueue", "Arn"]}
    assert queue["VisibilityTimeout"] >= props(cfn, "WebhookDeliveryFunction")["Timeout"]
    assert sam["Parameters"]["WebhookAllowLoopbackHttp"]["Default"] == "false"


def test_every_sqs_fed_function_is_sized_for_its_worst_batch(cfn: dict[str, Any]) -> None:
    """Issue 25: for every SQS event source mapping, the queue's visibility is at least 6x the function's Timeout
    (AWS's rule). For the webhook delivery function (its records may each wait on a receiver up to the attempt
    deadline), a batch whose every receiver holds its attempt to the deadline ends inside the Timeout, and the longest
    backoff's receive-to-invoke margin covers the visibility the poller's receive starts with."""
    from omnireel.webhooks.delivery import RECEIVE_TO_INVOKE_MARGIN_S, VISIBILITY_PER_TIMEOUT, worst_case_invocation_s

    resources = cfn["Resources"]
    mappings = {
        name: r["Properties"]
        for name, r in resources.items()
        if r["Type"] == "AWS::Lambda::EventSourceMapping"
        and "Fn::GetAtt" in r["Properties"]["EventSourceArn"]
        and resources[r["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]]["Type"] == "AWS::SQS::Queue"
    }
    assert mappings, "no SQS event source mapping found"
    for name, mapping in mappings.items():
        queue = resources[mapping["EventSourceArn"]["Fn::GetAtt"][0]]["Properties"]
        function = mapping["FunctionName"]["Ref"]
        timeout = props(cfn, function).get("Timeout", 3)
        visibility = queue.get("VisibilityTimeout", 30)
        assert visibility >= VISIBILITY_PER_TIMEOUT * timeout, f"{name}: visibility {visibility} < 6 x {timeout}"
        env = props(cfn, function).get("Environment", {}).get("Variables", {})
        if "WEBHOOK_ATTEMPT_DEADLINE_SECONDS" not in env:
            continue
        batch = int(mapping.get("BatchSize", 10))
        concurrency = int(env["WEBHOOK_DELIVERY_CONCURRENCY"])
        worst = worst_case_invocation_s(batch, concurrency, float(env["WEBHOOK_ATTEMPT_DEADLINE_SECONDS"]))
        assert worst <= timeout, f"{function}: a batch of hanging receivers needs {worst} s > Timeout {timeout}"
        assert visibility <= RECEIVE_TO_INVOKE_MARGIN_S, "the backoff cap assumes the receive was this recent"


def test_generate_image_may_publish_job_image_ready_to_the_job_events_topic_only(cfn: dict[str, Any]) -> None:
    statements = [
        s
        for policy in props(cfn, "GenerateImageFunctionRole")["Policies"]
        for s in policy["PolicyDocument"]["Statement"]
    ]
    (publish,) = [s for s in statements if "sns:Publish" in _actions(s)]
    assert publish["Resource"] == {"Ref": "JobEventsTopic"}
    env = props(cfn, "GenerateImageFunction")["Environment"]["Variables"]
    assert env["JOB_EVENTS_TOPIC_ARN"] == {"Ref": "JobEventsTopic"}


def test_only_events_with_a_webhook_reach_the_webhook_queue(cfn: dict[str, Any]) -> None:
    subscription = props(cfn, "WebhookSubscription")
    assert subscription["TopicArn"] == {"Ref": "JobEventsTopic"} and subscription["Protocol"] == "sqs"
    assert subscription["FilterPolicyScope"] == "MessageAttributes"
    assert subscription["FilterPolicy"] == {"webhook": [{"exists": True}]}
    # the Allow of the topic; the Deny of everyone else is issue 33's rule (test_send_policies.py)
    statements = props(cfn, "WebhookQueuePolicy")["PolicyDocument"]["Statement"]
    (statement,) = [s for s in statements if s["Effect"] == "Allow"]
    assert statement["Principal"] == {"Service": "sns.amazonaws.com"}
    assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Ref": "JobEventsTopic"}}}


def test_the_webhook_delivery_role_is_least_privilege(cfn: dict[str, Any]) -> None:
    statements = [
        s
        for policy in props(cfn, "WebhookDeliveryFunctionRole")["Policies"]
        for s in policy["PolicyDocument"]["Statement"]
    ]
    actions = sorted(a for s in statements for a in _actions(s))
    assert not [a for a in actions if a.endswith("*")]
    assert "sqs:SendMessage" not in actions and "dynamodb:PutItem" not in actions
    secret = [s for s in statements if "secretsmanager:GetSecretValue" in _actions(s)]
    assert [s["Resource"] for s in secret] == [{"Ref": "WebhookSigningSecret"}]


@pytest.mark.parametrize("function", ["ApiFunction", "InboxFunction", "FailOverdueJobsFunction"])
def test_starting_functions_may_describe_only_their_executions(cfn: dict[str, Any], function: str) -> None:
    statements = [
        s for policy in props(cfn, f"{function}Role")["Policies"] for s in policy["PolicyDocument"]["Statement"]
    ]
    (describe,) = [s for s in statements if "states:DescribeExecution" in _actions(s)]
    execution = "execution:${PipelineStateMachine.Name}:*"
    assert describe["Resource"] == {
        "Fn::Sub": f"arn:${{AWS::Partition}}:states:${{AWS::Region}}:${{AWS::AccountId}}:{execution}"
    }


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


# ---------------------------------------------------------------- issue 9: least privilege that works on AWS
def _evaluate(value: Any, cfn: dict[str, Any], params: dict[str, Any]) -> Any:
    """Just enough of CloudFormation's intrinsics to read a policy as deployed with ``params``."""
    if isinstance(value, list):
        return [_evaluate(v, cfn, params) for v in value]
    if not isinstance(value, dict) or len(value) != 1:
        return value
    ((fn, arg),) = value.items()
    if fn == "Ref":
        return params[arg]
    if fn == "Fn::If":
        name, yes, no = arg
        return _evaluate(yes if _evaluate(cfn["Conditions"][name], cfn, params) else no, cfn, params)
    if fn == "Fn::Equals":
        return str(_evaluate(arg[0], cfn, params)) == str(_evaluate(arg[1], cfn, params))
    if fn == "Fn::FindInMap":
        name, key, attribute = (_evaluate(a, cfn, params) for a in arg)
        return cfn["Mappings"][name][key][attribute]
    if fn == "Fn::Select":
        return _evaluate(arg[1], cfn, params)[int(arg[0])]
    if fn == "Fn::Split":
        return str(_evaluate(arg[1], cfn, params)).split(arg[0])
    if fn == "Fn::Sub":
        text, variables = (arg, {}) if isinstance(arg, str) else arg
        scope = {**params, **{k: _evaluate(v, cfn, params) for k, v in variables.items()}}
        return re.sub(r"\$\{([^}]+)\}", lambda m: str(scope[m[1]]), text)
    raise AssertionError(f"intrinsic {fn} not evaluated by this test")


def _ecr_pull_resource(cfn: dict[str, Any], region: str, image: str) -> str:
    params = {"AWS::Region": region, "AWS::AccountId": "111122223333", "AWS::Partition": "aws", "DlcImageUri": image}
    statements = props(cfn, "SageMakerExecutionRole")["Policies"][0]["PolicyDocument"]["Statement"]
    pull = next(s for s in statements if s.get("Sid") == "PullDlcImage")
    return _evaluate(pull["Resource"], cfn, params)


def test_ecr_pull_is_scoped_to_the_pinned_dlc_registry_by_default(cfn: dict[str, Any]) -> None:
    assert _ecr_pull_resource(cfn, "eu-west-1", "") == "arn:aws:ecr:eu-west-1:763104351884:repository/*"


def test_ecr_pull_is_scoped_to_the_registry_named_by_dlc_image_uri(cfn: dict[str, Any]) -> None:
    """Defect 4: with DlcImageUri set (regions outside the mapping) the DLC lives in AWS's account, not ours."""
    image = "380420809688.dkr.ecr.ap-southeast-3.amazonaws.com/vllm:omni-sagemaker-cuda-v1.6"
    resource = _ecr_pull_resource(cfn, "ap-southeast-3", image)
    assert resource == "arn:aws:ecr:ap-southeast-3:380420809688:repository/*"
    assert "111122223333" not in resource


def test_dlc_image_uri_must_be_an_ecr_image_uri(sam: dict[str, Any]) -> None:
    pattern = re.compile(sam["Parameters"]["DlcImageUri"]["AllowedPattern"])
    assert pattern.fullmatch("")
    assert pattern.fullmatch("763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:omni-sagemaker-cuda-v1.6")
    assert not pattern.fullmatch("public.ecr.aws/vllm/vllm:latest")
    assert not pattern.fullmatch("vllm:latest")


def _role_statements(cfn: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [s for policy in props(cfn, role).get("Policies", []) for s in policy["PolicyDocument"]["Statement"]]


@pytest.mark.parametrize(
    ("role", "prefixes"),
    [
        ("ReconcileVideoFunctionRole", ["async/*", "jobs/*"]),
        ("AsyncResultFunctionRole", ["async/*", "jobs/*"]),
        ("GenerateImageFunctionRole", ["jobs/*"]),
    ],
)
def test_functions_that_head_artifacts_may_list_exactly_those_prefixes(
    cfn: dict[str, Any], role: str, prefixes: list[str]
) -> None:
    """Defect 3: without s3:ListBucket S3 answers HeadObject of a missing key with 403, not 404."""
    listing = [s for s in _role_statements(cfn, role) if s["Action"] == "s3:ListBucket"]
    assert len(listing) == 1, role
    assert listing[0]["Resource"] == {"Fn::GetAtt": ["ArtifactsBucket", "Arn"]}
    granted = listing[0]["Condition"]["StringLike"]["s3:prefix"]
    assert sorted(granted if isinstance(granted, list) else [granted]) == prefixes


def test_relay_may_invoke_only_the_tts_endpoint(cfn: dict[str, Any]) -> None:
    """Defect 6: the bidirectional-stream action is not in the IAM catalogue; InvokeEndpoint is granted as well."""
    statements = [s for s in _role_statements(cfn, "RelayTaskRole") if "sagemaker" in str(s["Action"])]
    assert len(statements) == 1
    assert sorted(statements[0]["Action"]) == [
        "sagemaker:InvokeEndpoint",
        "sagemaker:InvokeEndpointWithBidirectionalStream",
    ]
    assert statements[0]["Resource"] == {"Ref": "TtsEndpoint"}


def test_the_inbox_function_may_list_its_prompts_so_a_vanished_version_is_a_404(cfn: dict[str, Any]) -> None:
    """Without s3:ListBucket a read of a deleted version answers 403: the job would never get its job.failed."""
    listing = [s for s in _role_statements(cfn, "InboxFunctionRole") if s["Action"] == "s3:ListBucket"]
    assert len(listing) == 1
    assert listing[0]["Condition"] == {"StringLike": {"s3:prefix": "prompts/*"}}
    assert listing[0]["Resource"]["Fn::Sub"].endswith("-inbox-${AWS::AccountId}-${AWS::Region}")


def test_a_key_given_twice_in_one_mapping_is_refused(tmp_path) -> None:
    """A route pasted twice (SubmitBatchUpload, issue 33) passed every local check: PyYAML keeps the last key."""
    import yaml

    from omnireel_template import load_template

    path = tmp_path / "template.yaml"
    path.write_text("Resources:\n  A:\n    Type: X\n  A:\n    Type: Y\n")
    with pytest.raises(yaml.constructor.ConstructorError, match="found duplicate key 'A'"):
        load_template(path)
    path.write_text("Resources:\n  A: {Type: X}\n  B: {Type: !Ref A}\n")
    assert set(load_template(path)["Resources"]) == {"A", "B"}
