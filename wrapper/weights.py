"""Whether a checkpoint is plain tensors in plain containers, read without importing torch.

Sealing checks that best.pth loads with torch.load(weights_only=True). Importing torch for that is
~1.3 s of CPU on the box at every seal. A zip checkpoint whose pickle uses only ordinary opcodes and
the few globals of a dense state dict (OrderedDict, a tensor or parameter rebuilt from a typed storage),
whose storages are all in the zip at exactly their size and whose tensors stay inside their storages, is
one torch loads: it is accepted here. Anything else is not refused here: torch decides, as before.
Nothing found in the file is ever called; every global resolves to a stand-in.
"""

import collections
import io
import pickle
import pickletools
import zipfile

# The storages a dense tensor is rebuilt from, by their bytes per element.
WEIGHTS_ITEMSIZE = {
    "FloatStorage": 4,
    "DoubleStorage": 8,
    "HalfStorage": 2,
    "BFloat16Storage": 2,
    "LongStorage": 8,
    "IntStorage": 4,
    "ShortStorage": 2,
    "CharStorage": 1,
    "ByteStorage": 1,
    "BoolStorage": 1,
    "ComplexFloatStorage": 8,
    "ComplexDoubleStorage": 16,
}

# The opcodes of containers, numbers, strings, the memo, globals, calls, persistent ids and BUILD (a
# state dict's OrderedDict carries its _metadata that way; every stand-in but that one refuses it): none
# makes an object by its class (INST, OBJ, NEWOBJ) or reads the extension registry.
# fmt: off
WEIGHTS_OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP", "NONE", "NEWTRUE", "NEWFALSE", "INT",
    "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT", "SHORT_BINUNICODE",
    "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINBYTES", "BINBYTES", "BINBYTES8", "EMPTY_TUPLE", "TUPLE",
    "TUPLE1", "TUPLE2", "TUPLE3", "EMPTY_LIST", "LIST", "APPEND", "APPENDS", "EMPTY_DICT", "DICT", "SETITEM",
    "SETITEMS", "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE", "GET", "BINGET", "LONG_BINGET", "GLOBAL",
    "STACK_GLOBAL", "REDUCE", "BINPERSID", "BUILD",
})
# fmt: on

WEIGHTS_PICKLE_LIMIT = 64 << 20  # a state dict's pickle is a few bytes per tensor; beyond this, torch decides


class WeightsUndecided(Exception):
    """Not a plain checkpoint as read here: torch decides."""


class WeightsStandIn:
    def __setstate__(self, state):
        raise WeightsUndecided(f"BUILD on a {type(self).__name__}")


class WeightsStorageType(WeightsStandIn):
    def __init__(self, name):
        self.itemsize = WEIGHTS_ITEMSIZE[name]


class WeightsStorage(WeightsStandIn):
    def __init__(self, numel):
        self.numel = numel


class WeightsTensor(WeightsStandIn):
    """What a tensor rebuilt from a checked storage stands for."""


class WeightsOrderedDict(collections.OrderedDict):
    def __setstate__(self, state):
        """A state dict's `_metadata` (versions of its modules): data, kept as data."""
        if not (isinstance(state, dict) and all(isinstance(key, str) for key in state)):
            raise WeightsUndecided("BUILD on an OrderedDict with a state that is not named attributes")
        self.__dict__.update(state)


def _weights_ints(values) -> bool:
    return isinstance(values, tuple) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)


def _weights_no_hooks(hooks) -> bool:
    return isinstance(hooks, dict) and not hooks


def weights_tensor(storage, offset, size, stride, requires_grad, hooks, metadata=None):
    """torch._utils._rebuild_tensor_v2's arguments, checked: a view inside its storage."""
    if not isinstance(storage, WeightsStorage) or not _weights_ints((offset,)):
        raise WeightsUndecided("a tensor without a checked storage")
    if not _weights_ints(size) or not _weights_ints(stride) or len(size) != len(stride):
        raise WeightsUndecided("a tensor's size and stride")
    if not isinstance(requires_grad, bool) or not _weights_no_hooks(hooks) or metadata not in (None, {}):
        raise WeightsUndecided("a tensor's flags")
    if all(size):  # an empty tensor reads nothing
        last = offset + sum((extent - 1) * step for extent, step in zip(size, stride, strict=True))
        if last >= storage.numel:
            raise WeightsUndecided("a tensor reaching past its storage")
    return WeightsTensor()


def weights_parameter(data, requires_grad, hooks):
    """torch._utils._rebuild_parameter's arguments, checked."""
    if not isinstance(data, WeightsTensor) or not isinstance(requires_grad, bool) or not _weights_no_hooks(hooks):
        raise WeightsUndecided("a parameter")
    return WeightsTensor()


def weights_ordered_dict(*args):
    if args:
        raise WeightsUndecided("an OrderedDict built from arguments")
    return WeightsOrderedDict()


class WeightsUnpickler(pickle.Unpickler):
    def __init__(self, data, records):
        super().__init__(io.BytesIO(data))
        self.records = records

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return weights_ordered_dict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return weights_tensor
        if (module, name) == ("torch._utils", "_rebuild_parameter"):
            return weights_parameter
        if module == "torch" and name in WEIGHTS_ITEMSIZE:
            return WeightsStorageType(name)
        raise WeightsUndecided(f"global {module}.{name}")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise WeightsUndecided("a persistent id that is not a storage")
        _, kind, key, location, numel = pid
        if not isinstance(kind, WeightsStorageType) or not isinstance(key, str) or not isinstance(location, str):
            raise WeightsUndecided("a storage's type, key or location")
        # torch refuses a record whose size is not exactly its elements' bytes, longer ones too.
        if not _weights_ints((numel,)) or self.records.get(key, -1) != numel * kind.itemsize:
            raise WeightsUndecided(f"storage {key} missing or not the size of its {numel} elements")
        return WeightsStorage(numel)


def plainly_loads(path) -> bool:
    """True when the file is a checkpoint of plain tensors that torch.load(weights_only=True) loads;
    False when that cannot be told without torch (torch decides)."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            pickles = [m for m in members if m.filename.count("/") == 1 and m.filename.endswith("/data.pkl")]
            if len(pickles) != 1 or pickles[0].file_size > WEIGHTS_PICKLE_LIMIT:
                return False
            if any(member.compress_type != zipfile.ZIP_STORED for member in members):
                return False  # torch.save stores every member; torch decides about anything else
            prefix = pickles[0].filename[: -len("data.pkl")] + "data/"
            data = archive.read(pickles[0])
        records = {m.filename[len(prefix) :]: m.file_size for m in members if m.filename.startswith(prefix)}
        if any(opcode.name not in WEIGHTS_OPCODES for opcode, _arg, _pos in pickletools.genops(data)):
            return False
        WeightsUnpickler(data, records).load()
        return True
    except Exception:  # a bad zip, a bad pickle, WeightsUndecided, MemoryError …: torch decides
        return False
