"""Modules: own parameters and gradients, call ``functional/`` for the math."""
from .module import Module
from .linear import Linear
