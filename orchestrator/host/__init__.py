"""Watching the host: GPUs (NVML), host facts, CPU state around each run, GPU telemetry."""
