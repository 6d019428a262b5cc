"""Shared by the benchmark scripts: peak memory of the current process."""


def peak_kb() -> int:
    """This process's peak resident memory in KiB (VmHWM: unlike ru_maxrss, not inherited from the parent)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")
