"""The CPU every process group spent: each host process (by name, summed over the hosts), each
shared service, this benchmark and the whole machine."""

from __future__ import annotations

from collections.abc import Sequence

import psutil

from bench.harness.hosts import Host
from pipeline.services.stack import Stack

# The CPU every process of the machine spent (other work's too): beside ours, it says whether
# the machine was saturated.
MACHINE = "machine (every process, others' too)"


class Meter:
    """CPU seconds per component: each host process (by name, summed over the hosts), each
    shared service, and this benchmark."""

    def __init__(self, stack: Stack, hosts: Sequence[Host]) -> None:
        self.services = {s.name: pid for s in stack.services
                         if (pid := s.running_pid()) is not None}
        self.hosts = hosts
        self.before: dict[str, float] = {}

    def snapshot(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for host in self.hosts:
            for name, cpu in host.cpu_by_process().items():
                out[f"host {name}"] = out.get(f"host {name}", 0.0) + cpu
        for name, pid in self.services.items():
            try:
                root = psutil.Process(pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for proc in procs:
                try:
                    times = proc.cpu_times()
                except psutil.NoSuchProcess:
                    continue
                out[name] = out.get(name, 0.0) + times.user + times.system
        own = psutil.Process().cpu_times()
        out["benchmark"] = own.user + own.system
        every = psutil.cpu_times()
        out[MACHINE] = every.user + every.nice + every.system + every.irq + every.softirq
        return out

    def start(self) -> None:
        self.before = self.snapshot()

    def stop(self) -> dict[str, float]:
        after = self.snapshot()
        return {k: v - self.before.get(k, 0.0) for k, v in after.items()}


