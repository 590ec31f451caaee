"""What the Python gRPC client tests share: named checks, counted."""

PASSED, FAILED = [], []


def check(name, fn):
    """Runs `fn`, printing and counting whether it passed."""
    try:
        fn()
        PASSED.append(name)
        print(f"ok: {name}", flush=True)
    except Exception as e:  # noqa: BLE001 - every failure is reported, then counted
        FAILED.append(name)
        print(f"FAILED: {name}: {e!r}", flush=True)
