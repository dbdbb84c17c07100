"""Speed only: the same answers, less CPU in the one process that runs the local AWS (each measured; see the cards)."""

from __future__ import annotations

import inspect
import json
import threading
from collections import deque
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import moto

from .cards import SPEED, Context, Patch


def install_server_dispatch(ctx: Context) -> None:
    patch_server_dispatch()


def install_deferred_batch_package(ctx: Context) -> None:
    defer_batch_package()


def install_sns_signing_key(ctx: Context) -> None:
    patch_sns_signing_key()


def install_program_cache(ctx: Context) -> None:
    patch_program_cache()


def install_dynamodb_responses(ctx: Context) -> None:
    patch_dynamodb_responses()


def install_update_expression_cache(ctx: Context) -> None:
    patch_update_expression_cache()


def install_sqs_send_attributes(ctx: Context) -> None:
    patch_sqs_send_attributes()


def install_update_traversal(ctx: Context) -> None:
    patch_update_traversal()


def install_account_lookup(ctx: Context) -> None:
    patch_account_lookup()


def install_action_names(ctx: Context) -> None:
    patch_action_names()


def install_json_path_cache(ctx: Context) -> None:
    patch_json_path_cache()


def install_condition_lex_cache(ctx: Context) -> None:
    patch_condition_lex_cache()


def install_update_checks_once(ctx: Context) -> None:
    patch_update_checks_once()


def install_query_candidates(ctx: Context) -> None:
    patch_query_candidates()


def install_update_tree_copy(ctx: Context) -> None:
    patch_update_tree_copy()


_DISPATCH_CACHE_MAX = 4096  # distinct hosts (virtual-hosted S3 buckets each have one): far more than a stack uses


def patch_server_dispatch(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 19: cache ``DomainDispatcherApplication.get_backend_for_host`` per (dispatcher, host)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.get_backend_for_host
    if getattr(original, "omnireel_cached", False):
        return
    cache: dict[tuple[int, str | None], Any] = {}

    def get_backend_for_host(self: Any, host: str | None) -> Any:
        key = (id(self), host)
        if key in cache:  # the caller (get_application) holds the dispatcher's lock
            return cache[key]
        backend = original(self, host)
        if len(cache) < _DISPATCH_CACHE_MAX:
            cache[key] = backend
        return backend

    get_backend_for_host.omnireel_cached = True  # type: ignore[attr-defined]
    set_attribute(DomainDispatcherApplication, "get_backend_for_host", get_backend_for_host)


def defer_batch_package() -> None:
    """Patch 21: register ``moto.batch`` without running its ``__init__`` until something it defines is used.

    moto's Step Functions interpreter imports ``moto.batch.utils`` at import time (one enum, for its Batch service
    task). Importing a submodule runs the package's ``__init__``, which imports Batch's models and with them all of
    moto's EC2 (AMI and instance-type catalogues): ~1 s of CPU at every stack start, for a service the stack never
    calls. The package module is created from its spec and registered; its ``__init__`` runs on the first lookup of a
    name it defines (``moto.batch.batch_backends``, which moto's server and ``mock_aws`` use to reach Batch), so Batch
    still works. No-op when ``moto.batch`` is already imported.
    """
    import importlib.util
    import sys

    if "moto.batch" in sys.modules:
        return
    spec = importlib.util.find_spec("moto.batch")
    if spec is None or spec.loader is None:
        return
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader
    lock = threading.Lock()

    def __getattr__(name: str) -> Any:  # PEP 562: only for names the module does not have yet
        with lock:
            if package.__dict__.get("__getattr__") is __getattr__:  # not loaded yet (loading removes this hook)
                del package.__dict__["__getattr__"]
                loader.exec_module(package)
        try:
            return package.__dict__[name]
        except KeyError:
            raise AttributeError(f"module 'moto.batch' has no attribute {name!r}") from None

    package.__dict__["__getattr__"] = __getattr__
    sys.modules["moto.batch"] = package
    moto.batch = package  # type: ignore[attr-defined]  # as the import system binds a submodule on its parent


# The process's SNS signing key (patch 20), made on first use. Module-level, not per application of the patch: the
# in-process test harnesses apply it for each test (monkeypatch), and a 2048-bit key per test was ~0.1 CPU-s each.
_SNS_KEYS: list[Any] = []
_SNS_KEY_LOCK = threading.Lock()


def patch_sns_signing_key(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 20 (see ``apply``): every SNS subscription signs with one key per process, as a region does on AWS."""

    from cryptography.hazmat.primitives.asymmetric import rsa
    from moto.sns.models import Subscription

    if getattr(Subscription.private_key, "omnireel_shared", False):
        return

    def private_key(self: Any) -> rsa.RSAPrivateKey:
        with _SNS_KEY_LOCK:
            if not _SNS_KEYS:
                _SNS_KEYS.append(rsa.generate_private_key(public_exponent=65537, key_size=2048))
            return _SNS_KEYS[0]

    private_key.omnireel_shared = True  # type: ignore[attr-defined]
    set_attribute(Subscription, "private_key", private_key)


# DynamoDB operations whose results are plain wire-format dicts (moto's DynamoResult): the fast path of patch 23.
# (Not DeleteItem: moto adds a legacy ConsumedCapacityUnits key its serializer drops; the fast path would decline.)
FAST_DYNAMODB_OPERATIONS = frozenset({"GetItem", "PutItem", "UpdateItem", "Query", "Scan"})


class _NotFast(Exception):
    """A value the fast DynamoDB response path does not handle: moto's own serializer answers instead."""


def _plain_json(value: Any, shape: Any) -> Any:
    """``value`` as moto's JSON serializer writes it for ``shape``, for plain dicts, lists and scalars only."""
    import base64

    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict) or shape.is_document_type:
            raise _NotFast
        members = shape.members
        if not members.keys() >= value.keys():  # a key moto's serializer would look up through an alias
            raise _NotFast
        out = {}
        for name, member in members.items():
            item = value.get(name)
            if item is not None:
                out[member.serialization.get("name", name)] = _plain_json(item, member)
        return out
    if kind == "map":
        if not isinstance(value, dict):
            raise _NotFast
        return {str(key): _plain_json(item, shape.value) for key, item in value.items()}
    if kind == "list":
        if not isinstance(value, list):
            raise _NotFast
        return [_plain_json(item, shape.member) for item in value]
    if kind == "string":
        if not isinstance(value, str):
            raise _NotFast
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise _NotFast
        return value
    if kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _NotFast
        return value
    if kind in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _NotFast
        return float(value)
    if kind == "blob":
        if not isinstance(value, (bytes, str)):
            raise _NotFast
        raw = value.encode("utf-8") if isinstance(value, str) else value
        return base64.b64encode(raw).strip().decode("utf-8")
    raise _NotFast  # timestamps and anything else: moto's serializer


def fast_dynamodb_response(operation_model: Any, result: Any) -> tuple[int, dict[str, str], str] | None:
    """The (status, headers, body) moto's JSON serializer would give ``result`` of a DynamoDB item operation, or None
    when the result holds anything but plain dicts, lists, strings, numbers, booleans and bytes."""
    if operation_model.name not in FAST_DYNAMODB_OPERATIONS or operation_model.has_event_stream_output:
        return None
    shape = operation_model.output_shape
    try:
        body = _plain_json(result, shape) if shape is not None else {}
    except _NotFast:
        return None
    version = operation_model.service_model.metadata.get("jsonVersion", "1.0")
    status = operation_model.http.get("responseCode", 200)
    return status, {"Content-Type": f"application/x-amz-json-{version}"}, json.dumps(body)


def patch_dynamodb_responses(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 23 (see ``apply``): DynamoDB item operations' results are written to JSON directly."""
    from moto import settings as moto_settings
    from moto.core.utils import get_service_model
    from moto.dynamodb.responses import DynamoHandler, DynamoResult

    original = DynamoHandler.serialized
    if getattr(original, "omnireel_fast", False):
        return

    def serialized(self: Any, action_result: Any) -> Any:
        if isinstance(action_result, DynamoResult) and not moto_settings.PRETTIFY_RESPONSES:
            operation = get_service_model(self.boto3_service_name).operation_model(self._get_action())
            fast = fast_dynamodb_response(operation, action_result.result)
            if fast is not None:
                status, headers, body = fast
                headers.update(self.response_headers)
                return status, headers, body
        return original(self, action_result)

    serialized.omnireel_fast = True  # type: ignore[attr-defined]
    set_attribute(DynamoHandler, "serialized", serialized)


_EXPRESSION_CACHE_MAX = 512  # distinct update expressions (the job and batch stores use a few dozen)


def patch_update_expression_cache(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 24 (see ``apply``): ``UpdateExpressionParser.make`` returns one parsed tree per expression string.

    Safe to share because nothing in moto changes a tree ``make`` returned: the handler only reads its clauses and the
    backend's validator deep-copies it before resolving names and values into it. A string that does not parse raises
    as before and is not kept.
    """
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    original = UpdateExpressionParser.make
    if getattr(original, "omnireel_cached", False):
        return
    parsed = lru_cache(maxsize=_EXPRESSION_CACHE_MAX)(original.__func__)

    def make(cls: Any, expression_str: str) -> Any:
        return parsed(cls, expression_str)

    make.omnireel_cached = True  # type: ignore[attr-defined]
    set_attribute(UpdateExpressionParser, "make", classmethod(make))


def patch_update_traversal(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 33 (see ``apply``): UpdateItem's validation asks each processor once per node class, not at every node.

    moto validates an UpdateExpression by walking its tree once per processor (ten of them), and at every node each
    processor rebuilt its map of node classes to handlers (``_processing_map``), made a tuple of its keys and ran
    ``isinstance`` against it (ABCs: slow checks). Every processor's map is a constant of its class (node classes to
    its own bound methods), so the handler for a node class is found once per processor and kept on it; the walk, the
    order of the map (the first class that matches wins) and every handler are moto's. Every map is a literal of
    node classes to the processor's own methods, so what is kept is the method's function per (processor class, node
    class), bound to the processor at hand (a handler that is not the processor's own method would be looked up per
    processor, as moto builds it: none is today).
    """
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node

    if getattr(DepthFirstTraverser.traverse_node_recursively, "omnireel_cached", False):
        return
    functions: dict[tuple[type, type], Any] = {}  # (processor class, node class) -> function, None or own_map
    own_map = object()  # the handler is not a method of the processor: ask the processor's own map

    def handler_for(processor: Any, node_type: type) -> Any:
        key = (type(processor), node_type)
        function = functions.get(key, functions)
        if function is functions:  # moto's isinstance(node, keys) then process(): the first class that matches
            handler = next(
                (handler for cls, handler in processor._processing_map().items() if issubclass(node_type, cls)), None
            )
            function = functions[key] = (
                None if handler is None else handler.__func__ if getattr(handler, "__self__", None) is processor
                else own_map
            )  # fmt: skip
        if function is None:
            return None
        if function is own_map:
            return next(h for cls, h in processor._processing_map().items() if issubclass(node_type, cls))
        return function.__get__(processor)

    node_types: set[type] = set()  # classes seen to be nodes (isinstance against the ABC is a slow check)

    def is_node(value: Any) -> bool:
        cls = type(value)
        if cls in node_types:
            return True
        if isinstance(value, Node):
            node_types.add(cls)
            return True
        return False

    def traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
        if is_node(node):
            parent_node = node.parent
            if node.children is not None:
                for i, child_node in enumerate(node.children):
                    self.pre_processing_of_child(node, i)
                    self.traverse_node_recursively(child_node, i)
            handler = handler_for(self, type(node))
            if handler is not None:
                node = handler(node)
                node.parent = parent_node
                if parent_node:
                    parent_node.children[child_id] = node
        return node

    traverse_node_recursively.omnireel_cached = True  # type: ignore[attr-defined]
    set_attribute(DepthFirstTraverser, "traverse_node_recursively", traverse_node_recursively)


def patch_sqs_send_attributes(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 25 (see ``apply``): inside ``SQSBackend.send_message``, ``Queue.attributes`` is only the attribute a send
    reads (``ContentBasedDeduplication``, as moto writes it: ``"true"``/``"false"``), not every attribute with three
    message counts. Everywhere else (GetQueueAttributes, ...) it is moto's, counts included."""

    from moto.sqs.models import Queue, SQSBackend

    original_send = SQSBackend.send_message
    if getattr(original_send, "omnireel_cheap_attributes", False):
        return
    full_attributes = Queue.attributes.fget
    sending = threading.local()

    def attributes(self: Any) -> dict[str, Any]:
        if not getattr(sending, "active", False):
            return full_attributes(self)
        value = self.content_based_deduplication
        return {"ContentBasedDeduplication": str(value).lower() if isinstance(value, bool) else value}

    def send_message(self: Any, *args: Any, **kwargs: Any) -> Any:
        outer = getattr(sending, "active", False)
        sending.active = True
        try:
            return original_send(self, *args, **kwargs)
        finally:
            sending.active = outer

    send_message.omnireel_cheap_attributes = True  # type: ignore[attr-defined]
    set_attribute(Queue, "attributes", property(attributes))
    set_attribute(SQSBackend, "send_message", send_message)


# Distinct definitions kept parsed: a stack has one state machine (updates add a few); an in-process test deploys one
# and runs it, so the definition it validated is the one its executions need next.
_PROGRAM_CACHE_MAX = 8
_program_lock = threading.Lock()  # executions started together wait for the one parse instead of each parsing


@lru_cache(maxsize=_PROGRAM_CACHE_MAX)
def _parsed_program(definition: str) -> Any:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    parsed = AmazonStateLanguageParser.parse(definition)[0]
    fix_heap_keys(parsed)
    return parsed


def shared_program(definition: str) -> Any:
    """The parsed program of ``definition``, parsed once per process (a definition that does not parse raises, every
    time: nothing is kept for it)."""
    with _program_lock:
        return _parsed_program(definition)


def patch_program_cache(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 22 (see ``apply``): each state machine definition is parsed once per process, not once per execution,
    and CreateStateMachine's validation is that parse (moto parsed it there, threw the result away, and parsed it again
    for the first execution).

    Sharing is safe because moto's evaluation components keep an execution's state in its ``Environment`` (its
    heap, stack, callbacks, event history), never on themselves. The one value a component creates lazily, its
    ``heap_key`` (the name its Retry counters are stored under in the environment's heap), is created for every
    component before the program is shared, so two executions that reach a Retry at once agree on its name. The
    cache lives in this module, so a test that installs the patch again (monkeypatch, per test) keeps it.
    """
    from moto.stepfunctions.parser.api import InvalidDefinition
    from moto.stepfunctions.parser.asl.parse.asl_parser import ASLParserException
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    if getattr(ExecutionWorker._get_evaluation_entrypoint, "omnireel_cached", False):
        return

    def _get_evaluation_entrypoint(self: Any) -> Any:
        return shared_program(self._evaluation_details.state_machine_details.definition)

    def _validate_definition(definition: str) -> None:  # moto's, with its errors, parsing through the cache
        try:
            shared_program(definition)
        except ASLParserException as asl_parser_exception:
            raise InvalidDefinition(message=repr(asl_parser_exception)) from None
        except Exception as exception:  # noqa: BLE001 - as moto: any parse failure is an invalid definition
            raise InvalidDefinition(
                message=f"Error={exception.__class__.__name__} Args={list(exception.args)} in definition "
                f"'{definition}'."
            ) from None

    _get_evaluation_entrypoint.omnireel_cached = True  # type: ignore[attr-defined]
    set_attribute(ExecutionWorker, "_get_evaluation_entrypoint", _get_evaluation_entrypoint)
    set_attribute(StepFunctionsParserBackend, "_validate_definition", staticmethod(_validate_definition))


def patch_account_lookup(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 31 (see ``apply``): the account of an access key is looked up in the IAM partitions that exist.

    moto's ``get_account_id_from`` reads ``account[partition]`` for every partition (aws, aws-cn, aws-us-gov, the ISO
    ones), and reading one creates it: an ``IAMBackend``, which with ``MOTO_IAM_LOAD_MANAGED_POLICIES`` (the stack's
    setting) builds ~1,300 AWS managed policies. An access key can only be in a partition whose backend created it,
    so the partitions not created yet are skipped, and none is created by a lookup."""
    import moto.iam.models as iam_models

    from ..iam.authorizer import key_account

    original = iam_models.get_account_id_from
    if getattr(original, "omnireel_existing_only", False):
        return

    def get_account_id_from(access_key: str) -> str:
        return key_account(access_key, iam_models.DEFAULT_ACCOUNT_ID)

    get_account_id_from.omnireel_existing_only = True  # type: ignore[attr-defined]
    set_attribute(iam_models, "get_account_id_from", get_account_id_from)


def patch_action_names(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 32 (see ``apply``): a response class's action names are listed once, not at every request.

    ``BaseResponse.call_action`` runs ``inspect.getmembers`` over the service's response class (hundreds of
    attributes, sorted) on every request to find the action's method. The list is kept per class and made again when
    a class in its MRO gains or loses an attribute (a patch adding a method); replacing a method changes no name."""
    import moto.core.responses as responses

    original = responses.method_names_from_class
    if getattr(original, "omnireel_cached", False):
        return
    cache: dict[type, tuple[tuple[int, ...], frozenset[str]]] = {}

    def shape(clazz: Any) -> tuple[int, ...]:
        return tuple(len(vars(base)) for base in clazz.__mro__)

    def method_names_from_class(clazz: Any) -> frozenset[str]:
        found = cache.get(clazz)
        if found is None or found[0] != shape(clazz):
            names = frozenset(original(clazz))
            found = cache[clazz] = (shape(clazz), names)  # after listing: reading annotations adds __annotations__
        return found[1]

    method_names_from_class.omnireel_cached = True  # type: ignore[attr-defined]
    set_attribute(responses, "method_names_from_class", method_names_from_class)


_JSON_PATH_CACHE_MAX = 4096  # distinct JSONPath strings: a state machine has a few dozen


# The modules of moto's Step Functions interpreter that call jsonpath_ng's ``parse`` on every evaluation, by name.
JSON_PATH_USERS = (
    "moto.stepfunctions.parser.asl.utils.json_path",  # InputPath, OutputPath, Parameters' "x.$" values, ItemsPath...
    "moto.stepfunctions.parser.asl.component.common.path.result_path",  # ResultPath
)


def patch_json_path_cache(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 34 (see ``apply``): each JSONPath string an execution evaluates is parsed once per process.

    moto's interpreter calls jsonpath_ng's ``parse`` for every path it evaluates, and each call builds a new PLY
    lexer and parser (~0.4 ms of CPU) for strings such as ``$.job_id`` that every state of every execution repeats.
    A parsed path is a tree of jsonpath_ng nodes that ``find`` only reads (the matches it returns are new objects),
    so one tree per string serves every evaluation, on every thread. A string that does not parse raises as before
    each time (``lru_cache`` keeps no exception)."""
    import importlib

    for name in JSON_PATH_USERS:
        module = importlib.import_module(name)
        original = module.parse
        if getattr(original, "omnireel_cached", False):
            continue
        cached = lru_cache(maxsize=_JSON_PATH_CACHE_MAX)(original)
        cached.omnireel_cached = True  # type: ignore[attr-defined]
        set_attribute(module, "parse", cached)


_LEXED_MAX = 4096  # distinct condition expressions kept (the product sends a few dozen)


def patch_condition_lex_cache(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 35 (see ``apply``): ``ConditionExpressionParser._lex_condition_expression`` lexes each expression string
    once; every call gets fresh nodes built from the kept tokens.

    The lexer reads only the expression string (names and values are resolved by later stages), and its nodes are all
    literal leaves with an empty children list: the later stages build new nodes from them, but a fresh node per call
    keeps any change a stage might make to one from reaching the next call. A string that does not lex raises as before
    and is not kept.
    """
    from moto.dynamodb.comparisons import ConditionExpressionParser

    original = ConditionExpressionParser._lex_condition_expression
    if getattr(original, "omnireel_cached", False):
        return
    lexed: dict[str, tuple[tuple[Any, Any, Any, Any], ...]] = {}

    def _lex_condition_expression(self: Any) -> Any:
        expression = self.condition_expression
        tokens = lexed.get(expression) if isinstance(expression, str) else None
        if tokens is None:
            nodes = original(self)
            if not isinstance(expression, str) or any(node.children for node in nodes):
                return nodes  # nothing kept for an unexpected shape: moto's own nodes
            tokens = tuple((n.nonterminal, n.kind, n.text, n.value) for n in nodes)
            if len(lexed) >= _LEXED_MAX:
                lexed.clear()
            lexed[expression] = tokens
        node = self.Node
        return deque(node(nonterminal=t[0], kind=t[1], text=t[2], value=t[3], children=[]) for t in tokens)

    _lex_condition_expression.omnireel_cached = True  # type: ignore[attr-defined]
    set_attribute(ConditionExpressionParser, "_lex_condition_expression", _lex_condition_expression)


def patch_update_checks_once(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 36 (see ``apply``): UpdateItem's two checks of the expression's shape run once per parsed expression and
    names.

    moto's validation starts with ``ActionCountValidator`` (one SET, REMOVE, ADD, DELETE section each) and
    ``OverlappingPathsValidator`` (no path twice). Both are called at every ``UpdateExpression`` node of the tree, and a
    tree nests one such node per clause, each call collecting the clauses below it again: about half of an UpdateItem's
    CPU. Neither changes the tree, and what they decide depends only on the tree and the ExpressionAttributeNames: not
    on the item, the values or the table. Patch 24 returns one tree per expression string, so an (expression tree,
    names) pair that passed both checks passes them again: later validations of the pair skip them and run the other
    processors, moto's, on moto's deep copy as before. A pair that failed is checked again every time (the same error).
    """
    import weakref

    from moto.dynamodb.parsing.validators import (
        ActionCountValidator,
        OverlappingPathsValidator,
        UpdateExpressionValidator,
    )

    if getattr(UpdateExpressionValidator.validate, "omnireel_checks_once", False):
        return
    checks = (ActionCountValidator, OverlappingPathsValidator)
    passed: weakref.WeakKeyDictionary[Any, set[tuple[tuple[str, str], ...]]] = weakref.WeakKeyDictionary()
    lock = threading.Lock()
    original_init = UpdateExpressionValidator.__init__

    def __init__(self: Any, expression: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, expression, *args, **kwargs)
        self._omnireel_expression = expression  # the tree as parsed (moto validates a deep copy of it)

    def validate(self: Any) -> Any:
        expression = self._omnireel_expression
        names = tuple(sorted((self.expression_attribute_names or {}).items()))
        with lock:
            known = names in passed.get(expression, ())
        left = sum(1 for processor in self.processors if type(processor) in checks)
        node = self.node_to_validate
        for processor in self.processors:
            if type(processor) in checks:
                if known:
                    continue
                node = processor.traverse(node)
                left -= 1
                if left == 0:
                    with lock:
                        passed.setdefault(expression, set()).add(names)
                continue
            node = processor.traverse(node)
        return node

    validate.omnireel_checks_once = True  # type: ignore[attr-defined]
    set_attribute(UpdateExpressionValidator, "__init__", __init__)
    set_attribute(UpdateExpressionValidator, "validate", validate)


def copy_tree(root: Any) -> Any:
    """A copy of a moto expression tree as ``copy.deepcopy`` makes it, node by node: each node a new object of its class
    with its attributes (``type``, ``children``, ``parent``: all a moto node has), its children copied the same way (a
    child that is not a node through ``copy.deepcopy``) and its ``parent`` the copy of its parent (the root's: none)."""
    import copy

    from moto.dynamodb.parsing.ast_nodes import Node

    def copied(node: Any, parent: Any) -> Any:
        new = object.__new__(type(node))
        new.__dict__.update(node.__dict__)
        new.parent = parent
        if node.children is not None:
            new.children = [
                copied(child, new) if isinstance(child, Node) else copy.deepcopy(child) for child in node.children
            ]
        return new

    return copied(root, None)


def patch_update_tree_copy(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 37 (see ``apply``): UpdateItem's validator copies the parsed expression's tree with ``copy_tree``.

    moto's validator deep-copies the tree before its processors resolve names and values into it (patch 24's tree is
    shared by every call); ``copy.deepcopy``'s generic machinery (a memo of every object, ``__reduce_ex__`` per node)
    was ~40 % of an UpdateItem's CPU once patch 36 ran the checks once. The copy is the same: new nodes of the same
    classes and attributes, parents pointing into the copy. Only a whole tree (a root: no parent) takes this path;
    anything else the module deep-copies (a list value in ``list_append``) goes to ``copy.deepcopy`` as before.
    """
    import copy

    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.ast_nodes import Node

    if getattr(validators.deepcopy, "omnireel_tree_copy", False):
        return

    def deepcopy(value: Any, memo: Any = None) -> Any:
        if memo is None and isinstance(value, Node) and value.parent is None:
            return copy_tree(value)
        return copy.deepcopy(value, memo)

    deepcopy.omnireel_tree_copy = True  # type: ignore[attr-defined]
    set_attribute(validators, "deepcopy", deepcopy)


_QUERY_CANDIDATES = threading.local()  # (table, its items a query may match, in all_items' order) while one runs


def _table_key(item: Any) -> Any:
    """The order moto's ``Table.all_items`` returns a table's items in: by primary key."""
    return (item.hash_key, item.range_key) if item.range_key else item.hash_key


def _equal(found: Any, value: Any) -> bool:
    return found is not None and found == value  # DynamoType's == reads the other side's type


def query_candidates(table: Any, hash_key: Any, index_name: str | None, hash_key_conditions: Any) -> list[Any] | None:
    """The items a Query may return, in ``all_items``' order: a superset of the ones moto's filter keeps (it filters
    them again), found without sorting the whole table. None: no shortcut (moto reads every item, as before)."""
    if index_name is None:
        if hash_key is None:
            return None
        partition = table.items.get(hash_key)
        if partition is None:
            return []
        items = list(partition.values()) if table.range_key_attr else [partition]
    else:
        conditions = list(hash_key_conditions or ())
        if not conditions:
            return None
        items = []
        for partition in table.items.values():
            for item in partition.values() if table.range_key_attr else (partition,):
                if all(_equal(item.attrs.get(name), value) for name, value in conditions):
                    items.append(item)
    items.sort(key=_table_key)
    return items


def patch_query_candidates(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 38 (see ``apply``): a Query reads its partition, not the whole table sorted.

    moto's ``Table.query`` starts from ``all_items()``, every item of the table sorted by primary key (a comparison of
    DynamoType objects in Python each time), and then keeps those of the queried partition (the table's, or the
    index's key condition): O(n log n) in the table's size for every Query, also on a table's own partition key. Here
    the query runs unchanged on a shorter list: the partition's items (the table's partition key: a dict lookup), or
    the items whose index key attributes equal the condition's (one pass, no sort), sorted by primary key as
    ``all_items`` sorts them. moto's filter keeps exactly the same items in the same order: a sorted list filtered is
    the filtered list sorted, and the key is unique per item. The list reaches ``all_items`` through a thread-local
    for the call's length, so a concurrent request on another thread sees the table as before."""
    from moto.dynamodb.models.table import Table

    original_all_items = Table.all_items
    original_query = Table.query
    if getattr(original_query, "omnireel_candidates", False):
        return
    signature = inspect.signature(original_query)

    def all_items(self: Any) -> Any:
        current = getattr(_QUERY_CANDIDATES, "current", None)
        if current is not None and current[0] is self:
            return list(current[1])
        return original_all_items(self)

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        candidates = query_candidates(
            self,
            bound.arguments.get("hash_key"),
            bound.arguments.get("index_name"),
            bound.arguments.get("hash_key_conditions"),
        )
        if candidates is None:
            return original_query(self, *args, **kwargs)
        previous = getattr(_QUERY_CANDIDATES, "current", None)
        _QUERY_CANDIDATES.current = (self, candidates)
        try:
            return original_query(self, *args, **kwargs)
        finally:
            _QUERY_CANDIDATES.current = previous

    all_items.omnireel_candidates = True  # type: ignore[attr-defined]
    query.omnireel_candidates = True  # type: ignore[attr-defined]
    set_attribute(Table, "all_items", all_items)
    set_attribute(Table, "query", query)


def fix_heap_keys(program: Any) -> int:
    """Create the lazy ``heap_key`` of every evaluation component reachable from ``program``; returns how many."""
    from moto.stepfunctions.parser.asl.component.component import Component
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent

    seen: set[int] = set()
    pending: list[Any] = [program]
    fixed = 0
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, (list, tuple, set, frozenset)):
            pending.extend(node)
        elif isinstance(node, dict):
            pending.extend(node.values())
        elif isinstance(node, Component):
            if isinstance(node, EvalComponent):
                _ = node.heap_key
                fixed += 1
            pending.extend(vars(node).values())
    return fixed


CARDS = [
    Patch(
        "19",
        "The server's routing cached per host",
        aws="(Routing only: no AWS behaviour.)",
        moto="get_backend_for_host lists moto's package folder (~150 stat calls) and tries every URL pattern on every "
        "request: ~6 % of the stack process's CPU.",
        test="tests/unit/local/test_server_dispatch.py::test_cached_dispatch_chooses_moto_s_backend_and_lists_the_package_once",
        upstream=SPEED,
        installs=install_server_dispatch,
    ),
    Patch(
        "21",
        "moto.batch's __init__ deferred",
        aws="(Import time only.)",
        moto="The Step Functions interpreter imports moto.batch.utils for one enum, which loads Batch and all of EC2: "
        "~1.5 s of CPU at every stack start.",
        test="tests/unit/local/test_deferred_batch_package.py::"
        "test_the_step_functions_interpreter_imports_without_batch_or_ec2_and_batch_still_works",
        upstream=SPEED,
        installs=install_deferred_batch_package,
    ),
    Patch(
        "20",
        "One SNS signing key per process",
        aws="A region signs its messages with one signing certificate.",
        moto="A new 2048-bit RSA key per subscription (~0.1-0.3 s of CPU at its first delivery).",
        test="tests/unit/local/test_sns_signing_key.py::test_every_subscription_signs_with_one_key_and_the_signatures_verify",
        upstream=SPEED,
        installs=install_sns_signing_key,
    ),
    Patch(
        "22",
        "One parse per state machine definition",
        aws="(Same executions.)",
        moto="Parses the definition with its pure-Python ANTLR parser for every execution (~18 ms of CPU), and once "
        "more to validate it in CreateStateMachine, throwing that parse away.",
        test="tests/unit/local/test_program_cache.py::"
        "test_concurrent_executions_share_one_parse_and_keep_their_own_retry_counts",
        upstream=SPEED,
        installs=install_program_cache,
    ),
    Patch(
        "23",
        "DynamoDB item results written straight to JSON",
        aws="(Same answers.)",
        moto="A model-driven serializer: 4-8 ms of CPU for one job record returned by UpdateItem.",
        test="tests/unit/local/test_dynamodb_fast_responses.py::test_the_fast_path_answers_exactly_as_moto_s_serializer",
        upstream=SPEED,
        installs=install_dynamodb_responses,
    ),
    Patch(
        "24",
        "One parse per UpdateExpression",
        aws="(Same updates.)",
        moto="Parses an UpdateItem's expression twice per call (~0.5-1.5 ms of CPU each).",
        test="tests/unit/local/test_update_expression_cache.py::test_one_parse_per_expression_and_independent_updates",
        upstream=SPEED,
        installs=install_update_expression_cache,
    ),
    Patch(
        "25",
        "SendMessage reads one queue attribute directly",
        aws="(Same sends.)",
        moto="Reads ContentBasedDeduplication through Queue.attributes, which counts the queue's messages: every send "
        "cost O(messages in the queue).",
        test="tests/unit/local/test_sqs_send_attributes.py::test_a_send_does_not_walk_the_queue_and_the_counts_stay_right",
        upstream=SPEED,
        installs=install_sqs_send_attributes,
    ),
    Patch(
        "31",
        "An access key's account looked up in the IAM partitions that exist",
        aws="(Same account.)",
        moto="The lookup reads every partition's IAM backend, which creates the five not in use, each building ~1,300 "
        "AWS managed policies: ~1.5 s of CPU at every stack's first requests.",
        test="tests/unit/local/test_speed_lookups.py::test_a_key_s_account_is_found_without_creating_a_partition",
        upstream=SPEED,
        installs=install_account_lookup,
    ),
    Patch(
        "32",
        "A response class's action names listed once",
        aws="(Same dispatch.)",
        moto="inspect.getmembers over the service's response class on every request: ~4 % of the stack's CPU.",
        test="tests/unit/local/test_speed_lookups.py::test_action_names_are_listed_once_per_class_and_follow_a_new_method",
        upstream=SPEED,
        installs=install_action_names,
    ),
    Patch(
        "33",
        "UpdateItem's validation finds each processor's handler once per node class",
        aws="(Same validation, same errors.)",
        moto="Walks the expression's tree once per processor (ten), rebuilding each processor's class map and running "
        "isinstance against a tuple of ABCs at every node: ~6 % of a busy stack's CPU.",
        test="tests/unit/local/test_update_traversal.py::test_the_same_updates_and_errors_with_one_lookup_per_node_class",
        upstream=SPEED,
        installs=install_update_traversal,
    ),
    Patch(
        "34",
        "One parse per JSONPath string",
        aws="(Same paths, same results.)",
        moto="The Step Functions interpreter parses every JSONPath it evaluates with jsonpath_ng, which builds a new "
        "PLY lexer and parser each time (~0.4 ms of CPU): ~3 % of a busy stack's CPU.",
        test="tests/unit/local/test_json_path_cache.py::test_each_path_is_parsed_once_and_every_execution_gets_its_own_results",
        upstream=SPEED,
        installs=install_json_path_cache,
    ),
    Patch(
        "35",
        "One lexing per condition expression",
        aws="(Same conditions, same errors.)",
        moto="Lexes every ConditionExpression, FilterExpression and KeyConditionExpression again on every call, a "
        "token at a time against six regexes compiled anew: ~2 % of the local AWS's CPU in a batch of jobs.",
        test="tests/unit/local/test_condition_lex_cache.py::test_the_same_answers_and_refusals_with_one_lexing_per_string",
        upstream=SPEED,
        installs=install_condition_lex_cache,
    ),
    Patch(
        "36",
        "UpdateItem's expression checks once per expression and names",
        aws="(Same updates, same errors.)",
        moto="Counts an UpdateExpression's sections and looks for overlapping paths at every nested node of its tree, "
        "each time collecting the clauses below it again, on every UpdateItem: about half of its CPU (1.7-1.9 ms).",
        test="tests/unit/local/test_update_checks_once.py::test_the_same_updates_and_errors_with_the_checks_once_per_pair",
        upstream=SPEED,
        installs=install_update_checks_once,
    ),
    Patch(
        "37",
        "UpdateItem's expression tree copied node by node",
        aws="(Same updates, same errors.)",
        moto="Deep-copies the parsed UpdateExpression's tree with copy.deepcopy on every UpdateItem: ~0.5 ms of CPU, "
        "~40 % of the call once patch 36 runs the shape checks once.",
        test="tests/unit/local/test_update_checks_once.py::test_the_tree_copy_is_the_deep_copy",
        upstream=SPEED,
        installs=install_update_tree_copy,
    ),
    Patch(
        "38",
        "A Query reads its partition, not the whole table sorted",
        aws="(Same items, same order, same pages.)",
        moto="Every Query sorts every item of the table by primary key (DynamoType comparisons in Python) before "
        "keeping the queried partition: O(n log n) in the table's size, for each of a sweep's 16 shard queries (an "
        "index Query at 3,000 items 11.0 -> 3.1 ms).",
        test="tests/unit/local/test_query_candidates.py::test_every_query_answers_as_moto_does",
        upstream=SPEED,
        installs=install_query_candidates,
    ),
]
