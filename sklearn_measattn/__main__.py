"""``python -m sklearn_measattn`` (and the ``measattn`` console script)."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
