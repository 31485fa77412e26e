"""The recorder: ``staticgrad.compile`` (``compiled``), the call signature, the tracer that watches
one eager call and writes its ops to a tape, the finish that turns a trace into a record, and the
``Plan`` that replays it. It sits above the eager core, the compiler and the runtime.
"""
