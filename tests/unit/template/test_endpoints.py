"""template.yaml's SageMaker models and endpoints as deployed (the SAM-transformed CloudFormation): one pinned image
and its registry, each model's environment, the instance pools, the video endpoint's async inference and its scaling
from zero. Each test pins a concrete property (issue 5; the image registry: issue 9) so that a regression fails
``make test``."""

from __future__ import annotations

import re
from typing import Any

import pytest

from omnireel_template import ROOT
from tests.unit.template.helpers import of_type, props

PINNED_IMAGE = "${Account}.dkr.ecr.${AWS::Region}.${AWS::URLSuffix}/vllm:omni-sagemaker-cuda-v1.6"


POOLS = ["ml.g6.xlarge", "ml.g6e.xlarge", "ml.g5.xlarge", "ml.g4dn.xlarge"]


# FLUX.2-klein-4B + its Qwen3-4B text encoder (~16 GB bf16) does not fit the 16 GB T4 of ml.g4dn (issue 16 item 6).
IMAGE_POOLS = ["ml.g6.xlarge", "ml.g6e.xlarge", "ml.g5.xlarge"]


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


def test_docs_state_that_four_steps_lose_the_composition() -> None:
    profiles = (ROOT / "docs" / "operations" / "deploy.md").read_text()
    assert "4 steps does not keep the reference image's composition" in profiles
    quotas = (ROOT / "docs" / "operations" / "quotas.md").read_text()
    for quota in [*POOLS, "ml.g6e.xlarge"]:
        assert f"{quota} for endpoint usage" in quotas


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
