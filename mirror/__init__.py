"""The mirror-maker: many source clusters into one aggregate cluster."""
