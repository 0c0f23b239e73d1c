"""minidynamo: a small symbolic bytecode interpreter that captures what a Python function
does with tensors (and user-written Triton kernels) into a guarded torch.fx graph."""
from .api import OptimizedFunction, OptimizedModule, optimize, reset
from .backends import list_backends, register_backend
from .cache import RecompileError
from .compile_report import init_from_env as _init_report
from .compile_report import report
from .config import config
from .dynamic import mark_dynamic, mark_static
from .exc import BackendError, Unsupported
from .explain import explain
from .logs import init_from_env as _init_logs
from .logs import set_logs
from .markers import allow_in_graph, disable, graph_break

_init_logs()
_init_report()

__all__ = ["optimize", "explain", "reset", "Unsupported", "config", "set_logs",
           "register_backend", "list_backends", "OptimizedFunction", "OptimizedModule", "RecompileError", "BackendError",
           "report", "graph_break", "disable", "allow_in_graph", "mark_dynamic", "mark_static"]
__version__ = "0.1.0"
