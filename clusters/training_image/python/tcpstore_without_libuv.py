"""Debian's PyTorch 2.6 is built without libuv, yet its TCPStore (which torchrun's rendezvous
creates) asks for libuv unless told not to, and fails: "use_libuv was requested but PyTorch was
build without libuv support". Loaded at interpreter start (tcpstore_without_libuv.pth) when
USE_LIBUV=0, as the training image sets it: TCPStore then defaults to use_libuv=False."""

import os

if os.environ.get("USE_LIBUV") == "0":
    try:
        import torch.distributed as _dist
    except ImportError:  # not a torch program's interpreter: nothing to do
        pass
    else:
        _Base = _dist.TCPStore

        class TCPStore(_Base):  # type: ignore[misc,valid-type]
            def __init__(self, *args: object, **kwargs: object) -> None:
                kwargs.setdefault("use_libuv", False)
                super().__init__(*args, **kwargs)

        # Every module that took the name already, and those that take it later.
        import sys

        for _name, _module in list(sys.modules.items()):
            if _name.startswith("torch") and getattr(_module, "TCPStore", None) is _Base:
                setattr(_module, "TCPStore", TCPStore)  # noqa: B010
