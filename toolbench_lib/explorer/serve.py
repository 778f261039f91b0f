"""Voilà with :func:`~toolbench_lib.explorer.app.page_hook` before each page's kernel starts
(``python -m toolbench_lib.explorer.serve <Voilà's arguments>``, what :func:`.app.voila_argv` runs)."""

from __future__ import annotations

from traitlets.config import Config
from voila.app import Voila

from .app import page_hook


def main(argv: list[str] | None = None) -> None:
    """Serve as ``voila`` does, with the page hook configured."""
    config = Config()
    config.VoilaConfiguration.prelaunch_hook = page_hook
    Voila.launch_instance(argv=argv, config=config)


if __name__ == "__main__":
    main()
