"""hydrafusion-traces tailer: rebuilds HydraFusion turns from Copilot CLI session logs."""

__version__ = "0.1.0"
