"""At the interpreter's exit, the extension's threads are let finish what they do in Python.

An awaited call's result reaches asyncio from one of the extension's threads, which still holds
Python objects for a moment after the awaiting coroutine can resume. When the program ends right
then (its last ``await`` in ``asyncio.run``), the interpreter finalizes while that thread waits
for the GIL, and Python before 3.14 ends such a thread with ``pthread_exit``: its unwinding
releases those objects without the GIL, and the process dies of a segmentation fault (seen in
the quickstart under load, about one run in three). pyo3-async-runtimes has no shutdown to wait
on (PyO3/pyo3-async-runtimes#40), so the GIL is given up for a bounded moment at exit: atexit
handlers run before finalization begins.
"""

import atexit
import time

# Enough for a thread that has its result to hand to be scheduled and finish, on a busy machine.
_SETTLE_SECONDS = 0.1

atexit.register(time.sleep, _SETTLE_SECONDS)
