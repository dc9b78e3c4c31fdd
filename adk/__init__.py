"""pyeino's agent kit: ChatModelAgent on the ReAct graph, Runner and events."""
