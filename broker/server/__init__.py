"""The Twisted side of the broker: listener, framing, dispatch, handlers, delayed operations."""
