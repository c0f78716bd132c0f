"""The node agent: the kubelet part of a test cluster whose control plane is real
(scripts/kube-control-plane.sh). See node_agent.py for what it fakes."""

from .node_agent import NodeAgent, node_spec

__all__ = ["NodeAgent", "node_spec"]
