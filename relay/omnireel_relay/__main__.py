"""``python -m omnireel_relay``: run the relay with settings from ``OMNIREEL_RELAY_*``."""

from .app import main

if __name__ == "__main__":
    main()
