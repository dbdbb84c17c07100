"""omnireel real-time TTS relay: vLLM-Omni streaming-TTS WebSocket in, SageMaker bidi stream (or WebSocket) out."""

__version__ = "0.1.0"
