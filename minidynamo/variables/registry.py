"""Which tracker models which real object: every rule outside builder.py's own, in one
place and in the order they are tried. Layer: the wiring above the trackers (it imports
every module that models a kind of object; none of them registers itself).

- `WRAPPERS`: a real value reached by the trace (an argument, a global, an attribute) that
  builder.wrap does not model itself → `Wrapper(predicate(value), factory(tx, value,
  source), identity)`; identity=True: the value is guarded by identity before the factory
  runs, False: the factory installs the guards it relies on (a container passed in is
  guarded by type and contents).
- `CONSTRUCTORS`: a class called in the trace → `Constructor(predicate(cls), factory(tx,
  cls, args, kwargs))`; specific models come before the generic ones (torch.nn, user
  classes).
- `BUILTIN_HANDLERS`: builtins and C methods called in the trace whose handler lives with
  the model it needs, tried after builtins.py's own table.
- `IDENTITY_KEYS`: trackers of objects as dict keys / set members (hashed by value, a
  dataclass's generated methods, or by identity);
  `DICT_WITH_OBJECT_KEYS`: a plain dict passed in holding such keys.
- `ITEM_PROTOCOLS`: objects passed in whose iteration and indexing are modelled (torch's
  module containers) → `ItemProtocol(container_class(obj), items(tx, var, cls),
  getitem(tx, var, cls, key))`.

The trackers read these tables as `tx.registry` (interpreter/tracker_services.py): they
cannot import this module, which imports them.
"""
from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import itertools
import os
import types
import typing
from collections import Counter, OrderedDict, defaultdict, deque
from typing import Callable, NamedTuple

import torch

from .. import regions
from . import (attribute_builtins, autograd, builder, c_callables, collections_types, copying, deques, dict_subclasses, enums,
               distributed, environ, identity_keys, iterutils, library_contexts, made_classes, mapping_proxies,
               namedtuples, nn_modules, numpy_interop, operator_getters, pytree_calls,
               object_builtins, storages, super_calls, torch as torch_trackers, triton, typing_forms, user_modules,
               user_objects, value_keys)
from ..sources import AttrSource
from .builtins import BuiltinVariable
from .functions import UserFunctionVariable


class Wrapper(NamedTuple):
    predicate: Callable
    factory: Callable
    identity: bool = True


class Constructor(NamedTuple):
    predicate: Callable
    factory: Callable


class ItemProtocol(NamedTuple):
    container_class: Callable  # (obj) -> the container class whose item protocol obj keeps, or None
    items: Callable  # (tx, var, cls) -> what iterating var yields
    getitem: Callable  # (tx, var, cls, key) -> var[key]


def _builtin(tx, value, source):
    return BuiltinVariable(value, source)


def _script_original(tx, value, source):
    original = value._torchdynamo_inline  # fixed for the (identity-guarded) script function
    return UserFunctionVariable(original, AttrSource(source, "_torchdynamo_inline") if source is not None else None)


WRAPPERS: tuple = (
    # a class or function the trace made (read back: `type(obj)`, a method): its tracker
    Wrapper(made_classes.is_made, made_classes.wrap_made, identity=False),
    Wrapper(lambda v: v is copy.deepcopy or v is copy.copy, copying._copy_function),
    Wrapper(lambda v: v is object.__setattr__ or v is object.__getattribute__, _builtin),
    Wrapper(typing_forms.is_type_hint, lambda tx, v, source: typing_forms.TypeHintVariable(v, source)),
    Wrapper(lambda v: v is typing.get_origin or v is typing.get_args,
            lambda tx, v, source: typing_forms.TypingQueryVariable(v, source)),
    Wrapper(identity_keys._is_set_of_classes, identity_keys._wrap_set_of_classes, identity=False),
    Wrapper(dict_subclasses._modelled_instance, dict_subclasses._wrap_dict_object, identity=False),
    Wrapper(lambda v: type(v) is dataclasses.Field, dict_subclasses._wrap_field, identity=False),
    Wrapper(dict_subclasses._is_unbound, _builtin),
    Wrapper(lambda v: type(v) in (OrderedDict, defaultdict, Counter), collections_types._wrap_dict, identity=False),
    Wrapper(collections_types._is_fromkeys, collections_types._wrap_fromkeys, identity=False),
    Wrapper(lambda v: type(v) is deque, deques._wrap_deque, identity=False),
    Wrapper(lambda v: type(v) is types.MappingProxyType, mapping_proxies.wrap_proxy, identity=False),
    Wrapper(namedtuples._is_stock_function, namedtuples._wrap_stock_function),
    Wrapper(namedtuples._is_uninstantiable_constant, namedtuples._wrap_uninstantiable_constant, identity=False),
    Wrapper(lambda v: v is collections.namedtuple or v is typing.NamedTuple, namedtuples._wrap_factory),
    Wrapper(lambda v: type(v) is torch.UntypedStorage, storages._wrap_storage, identity=False),
    Wrapper(distributed.is_process_group, distributed._wrap_process_group),
    Wrapper(lambda v: v is os.environ, environ._wrap_environ),
    Wrapper(pytree_calls.is_treespec, pytree_calls.wrap_treespec, identity=False),
    Wrapper(lambda v: v is itertools.chain, iterutils._wrap_chain_class),
    Wrapper(lambda v: type(v) in operator_getters.GETTER_CLASSES, operator_getters.wrap_getter),
    Wrapper(lambda v: type(v) in (zip, enumerate), iterutils._wrap_pulled, identity=False),
    Wrapper(lambda v: numpy_interop.AVAILABLE and numpy_interop._is_numpy_object(v), numpy_interop._wrap_numpy_object),
    Wrapper(lambda v: numpy_interop.AVAILABLE and numpy_interop._is_numpy_value(v), numpy_interop._wrap_numpy_value,
            identity=False),
    Wrapper(lambda v: v is torch.nn.Module.__init__, user_modules._wrap_module_init),
    # a @torch.jit.script function: its Python original inlined, as torch.compile does
    Wrapper(lambda v: isinstance(v, torch.jit.ScriptFunction)
            and type(getattr(v, "_torchdynamo_inline", None)) is types.FunctionType, _script_original),
    Wrapper(lambda v: type(v) is regions.EnteredManager, regions._wrap_entered, identity=False),
    Wrapper(lambda v: type(v) is regions.WithCarrier, regions._wrap_carrier, identity=False),
    # Triton's objects: the predicates import triton only for objects whose type comes from
    # it, so importing minidynamo never imports triton (TRITON_INTERPRET may be set later).
    Wrapper(triton.is_triton_kernel, triton._wrap_kernel),
    Wrapper(triton.is_triton_builder, triton._wrap_builder),
    Wrapper(triton.is_triton_pure_function, triton._wrap_pure_function),
    Wrapper(lambda v: v is library_contexts.DISABLE_SAVED_TENSORS_HOOKS,
            lambda tx, value, source: library_contexts.DisableSavedTensorsHooksFunction(value, source)),
    Wrapper(lambda v: type(v) in attribute_builtins.C_DESCRIPTOR_TYPES,
            lambda tx, value, source: attribute_builtins.CDescriptorVariable(value, source)),
    # Last: any other C callable, kept opaque (passed around, rebuilt; calling it declines).
    Wrapper(c_callables.is_untraced_c_callable, c_callables._wrap, identity=False),
)

CONSTRUCTORS: tuple = (
    Constructor(lambda cls: cls is torch.autograd.profiler.record_function,
                lambda tx, cls, args, kwargs: library_contexts.make_record_function(args, kwargs)),
    Constructor(lambda cls: cls in library_contexts.PROFILE_CLASSES,
                lambda tx, cls, args, kwargs: library_contexts.make_profile(cls, args, kwargs)),
    Constructor(lambda cls: cls in iterutils._FACTORIES, iterutils._construct),
    Constructor(lambda cls: cls in operator_getters.GETTER_CLASSES, operator_getters.make_getter),
    Constructor(lambda cls: namedtuples.namedtuple_base(cls) is not None, namedtuples._make_namedtuple),
    Constructor(builder.is_structseq, builder.make_structseq),
    Constructor(lambda cls: cls is deque, deques._make_deque),
    Constructor(lambda cls: cls is Counter, collections_types._make_counter),
    Constructor(lambda cls: cls is defaultdict, collections_types._make_defaultdict),
    Constructor(lambda cls: cls is OrderedDict, collections_types._make_ordered_dict),
    Constructor(dict_subclasses.is_dict_subclass, dict_subclasses._construct),
    Constructor(enums.is_enum_class, enums.lookup_member),
    # parameter subclasses defined outside torch too
    Constructor(lambda cls: isinstance(cls, type) and issubclass(cls, torch.nn.Parameter),
                torch_trackers.make_parameter),
    Constructor(nn_modules._is_torch_nn_class, nn_modules._construct),
    Constructor(torch_trackers._is_distribution_class, torch_trackers._make_distribution),
    Constructor(autograd.is_plain_function_class, autograd.make_function_object),
    Constructor(user_objects.is_user_class, user_objects._construct),
    Constructor(user_modules.is_user_module_class, user_modules._construct),
)

def _copied(make):
    """An iterutils handler, given its own list and dict of the arguments."""
    return lambda tx, args, kwargs: make(tx, list(args), dict(kwargs))


BUILTIN_HANDLERS: dict = {
    **dict_subclasses.unbound_handlers(),  # (the named ones below win, as they were set first)
    itertools.tee: _copied(iterutils.make_tee),
    itertools.chain.from_iterable: _copied(iterutils.chain_from_iterable),
    functools.cmp_to_key: _copied(iterutils.make_cmp_to_key),
    object.__setattr__: object_builtins.object_setattr,
    object.__getattribute__: object_builtins.object_getattribute,
    setattr: object_builtins._setattr,
    delattr: object_builtins._delattr,
    vars: object_builtins._vars,
    super: super_calls.call_super,
}

IDENTITY_KEYS: tuple = (value_keys.value_key, identity_keys.identity_key)
# A plain dict passed in with keys hashed by identity (the builder finds them scanning its keys).
DICT_WITH_OBJECT_KEYS = identity_keys._wrap_dict

ITEM_PROTOCOLS: tuple = (
    ItemProtocol(nn_modules.passed_container_class, nn_modules.container_items, nn_modules.container_getitem),
)
