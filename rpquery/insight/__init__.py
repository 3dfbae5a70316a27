"""Why a request finds no host, and how much more fits (headroom)."""
