"""Platinum's Python SDK.

``Platinum`` is the blocking client, ``AsyncPlatinum`` the asyncio one; both
read ``PT_TOKEN`` and ``PT_API_URL`` when not given a token and URL::

    from platinum import Platinum

    client = Platinum()
    sbx = client.sandboxes.create(template="pt-base", wait_for_running=True)
    print(sbx.exec(["echo", "hi"]).stdout)
    sbx.delete()
"""

from ._async import (
    AsyncArtifacts,
    AsyncCodeContexts,
    AsyncCommands,
    AsyncFiles,
    AsyncPlatinum,
    AsyncPreview,
    AsyncProcesses,
    AsyncProcessStream,
    AsyncSandbox,
    AsyncSandboxes,
    AsyncSandboxPage,
)
from ._code import CodeContext, Execution, ExecutionError, Logs, Result
from ._core import DEFAULT_API_URL, IDEMPOTENCY_HEADER, VERSION, new_idempotency_key
from ._errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    CapacityError,
    ConflictError,
    DiskGrowUnsupportedError,
    ForbiddenError,
    IdempotencyKeyInProgressError,
    IdempotencyKeyReusedError,
    InternalError,
    InvalidRequestError,
    NoSpaceError,
    NotFoundError,
    PayloadTooLargeError,
    PlatinumError,
    QuotaExceededError,
    SandboxDestroyedError,
    SandboxFailedError,
    SandboxNotReadyError,
    SandboxNotResizableError,
    SandboxStateError,
    SandboxTTLExceededError,
    StreamEndedError,
    UnauthorizedError,
    UnavailableError,
    WaitTimeoutError,
)
from ._records import (
    Artifact,
    EnvResult,
    ExecEvent,
    ExecResult,
    FileEntry,
    Metrics,
    NetworkResult,
    PreviewURL,
    Process,
    Project,
    Record,
    ResizeResult,
    SandboxFields,
    Snapshot,
    Usage,
)
from ._streams import AsyncByteStream, AsyncExecStream, ByteStream, ExecStream
from ._sync import (
    Artifacts,
    CodeContexts,
    Commands,
    Files,
    Platinum,
    Preview,
    Processes,
    ProcessStream,
    Sandbox,
    Sandboxes,
    SandboxPage,
)

__version__ = VERSION

__all__ = [
    "Platinum", "AsyncPlatinum", "Sandbox", "AsyncSandbox", "Sandboxes", "AsyncSandboxes", "SandboxPage",
    "AsyncSandboxPage", "Files", "AsyncFiles", "Processes", "AsyncProcesses", "ProcessStream",
    "AsyncProcessStream", "Commands", "AsyncCommands", "Preview", "AsyncPreview", "Artifacts", "AsyncArtifacts",
    "CodeContexts", "AsyncCodeContexts", "Execution", "ExecutionError", "Result", "Logs", "CodeContext",
    "ExecStream", "AsyncExecStream", "ByteStream", "AsyncByteStream",
    "Record", "SandboxFields", "ExecResult", "ExecEvent", "FileEntry", "EnvResult", "ResizeResult", "Metrics",
    "Usage", "Snapshot", "PreviewURL", "NetworkResult", "Process", "Project", "Artifact",
    "PlatinumError", "APIError", "APIConnectionError", "APITimeoutError", "WaitTimeoutError", "SandboxStateError",
    "StreamEndedError", "InvalidRequestError", "SandboxTTLExceededError", "UnauthorizedError", "ForbiddenError",
    "NotFoundError", "ConflictError", "SandboxNotReadyError", "SandboxDestroyedError", "SandboxFailedError",
    "SandboxNotResizableError", "DiskGrowUnsupportedError", "IdempotencyKeyReusedError",
    "IdempotencyKeyInProgressError", "QuotaExceededError", "PayloadTooLargeError", "NoSpaceError", "CapacityError",
    "UnavailableError", "InternalError",
    "DEFAULT_API_URL", "IDEMPOTENCY_HEADER", "new_idempotency_key", "__version__",
]
