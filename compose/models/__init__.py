"""Chat models."""
