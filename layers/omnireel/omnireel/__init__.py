"""omnireel domain package: prompt -> image -> video on vLLM-Omni endpoints.

Pure logic and typed models live in the top-level modules; the thin AWS clients live in
``omnireel.aws``. Lambda handlers in ``functions/`` parse input, call one function here and map errors.
"""

__version__ = "0.1.0"
