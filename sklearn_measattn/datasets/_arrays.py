"""Reading batches of measures from ``.npy`` and ``.npz`` files."""

from __future__ import annotations

import os
import re
import zipfile

import numpy as np

_DEFAULT_NPZ_KEY = "X"
_NPY_MAGIC = b"\x93NUMPY"
_SHOWN = 8  # how many names an error message lists before "..."


def _object_array_hint(name, exc):
    return ValueError(
        f"{name} holds Python objects (e.g. a list of arrays of different lengths saved with np.save), "
        f"which are not loaded for safety ({exc}). Save one array per measure instead: "
        "np.savez(path, *list_of_arrays)."
    )


def _read_npy(path):
    name = os.path.basename(path)
    with open(path, "rb") as handle:
        if handle.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
            raise ValueError(f"Could not read {name} as a .npy array: it does not start like a file written by np.save.")
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise _object_array_hint(name, exc) from None
        raise ValueError(f"Could not read {name} as a .npy array: {exc}") from None
    except (OSError, EOFError) as exc:
        raise ValueError(f"Could not read {name} as a .npy array: {exc}") from None
    _check_numeric_array(array, name)
    if array.ndim != 3:
        hint = " For a single measure save X[np.newaxis]; for ragged measures use an .npz file." if array.ndim == 2 else ""
        raise ValueError(
            f"{name} holds an array of shape {array.shape} ({array.ndim}-D); a batch of measures is 3-D: "
            f"(n_samples, n_points, n_features).{hint}"
        )
    return array, list(range(array.shape[0]))


def _numbered(files, prefix):
    pattern = re.compile(rf"^{re.escape(prefix)}_(\d+)$")
    numbered = {}
    for name in files:
        match = pattern.match(name)
        if match:
            numbered[int(match.group(1))] = name
    return numbered


def _resolve_npz_names(files, key, name):
    """Names of the arrays to load, and whether they form one dense batch."""
    prefix = _DEFAULT_NPZ_KEY if key is None else key
    if prefix in files:
        return [prefix], True
    candidates = [prefix] if key is not None else [prefix, "arr"]
    for candidate in candidates:
        numbered = _numbered(files, candidate)
        if numbered:
            missing = sorted(set(range(max(numbered) + 1)) - set(numbered))
            if missing:
                raise ValueError(
                    f"{name} has per-measure arrays {candidate}_0, {candidate}_1, ... with gaps: "
                    f"{', '.join(f'{candidate}_{i}' for i in missing[:_SHOWN])} missing. Number the measures 0..n-1."
                )
            return [numbered[i] for i in range(len(numbered))], False
    if key is None and len(files) == 1:
        return list(files), True
    present = sorted(files)
    shown = present[:_SHOWN] + (["..."] if len(present) > _SHOWN else [])
    raise ValueError(
        f"{name} has no array {prefix!r} and no per-measure arrays {prefix}_0, {prefix}_1, ...; "
        f"arrays present: {shown}. Pass key= to choose one (key='y' for targets)."
    )


def _read_npz(path, key):
    name = os.path.basename(path)
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"Could not read {name} as an .npz archive: {exc}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{name} is a single .npy array, not an .npz archive; rename it to .npy.")
    with archive:
        names, dense = _resolve_npz_names(archive.files, key, name)
        arrays = []
        for array_name in names:
            where = f"{name}[{array_name!r}]"
            try:
                array = archive[array_name]
            except ValueError as exc:
                if "allow_pickle" in str(exc):
                    raise _object_array_hint(where, exc) from None
                raise ValueError(f"Could not read {where}: {exc}") from None
            _check_numeric_array(array, where)
            expected = 3 if dense else 2
            if array.ndim != expected:
                layout = "(n_samples, n_points, n_features)" if dense else "(n_points, n_features), one measure"
                hint = " For 1-D points use x.reshape(-1, 1)." if array.ndim == 1 else ""
                raise ValueError(
                    f"{where} has shape {array.shape} ({array.ndim}-D); expected {expected}-D {layout}.{hint}"
                )
            arrays.append(array)
    if dense:
        return arrays[0], list(range(arrays[0].shape[0]))
    return arrays, names


def _check_numeric_array(array, name):
    if array.dtype.kind not in "iuf":
        raise TypeError(
            f"{name} has dtype {array.dtype}; measures must hold real numbers (integers or floats)."
            + (" Split complex values into real and imaginary features." if array.dtype.kind == "c" else "")
        )
