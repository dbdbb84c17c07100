"""template.yaml's observability as deployed: the alarms, tracing, and one log group with retention per function."""

from __future__ import annotations

from typing import Any

from omnireel_template import function_folders, load_template
from tests.unit.template.helpers import of_type

FUNCTION_FOLDERS = function_folders()


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
