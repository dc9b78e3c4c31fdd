"""pyeino's graph runtime: typed graphs of chat models, tools and lambdas, run in four paradigms."""
