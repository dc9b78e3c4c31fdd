"""The travel tools of examples/travel_agent.py, served over MCP (stdio) with the official ``mcp`` SDK.

``examples/mcp_agent.py`` starts it; to try it with any MCP client: ``python examples/mcp_travel_server.py``.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

server = MCPServer("travel", log_level="WARNING")


class Forecast(BaseModel):
    city: str
    date: str
    forecast: str
    temperature_c: str
    packing_hint: str


@server.tool()
def get_weather(city: str, date: str = "明天") -> Forecast:
    """查询指定城市和日期的天气预报"""
    if city != "杭州":
        raise ToolError(f"没有{city}的天气数据")
    return Forecast(
        city=city, date=date, forecast="上午多云，15点后小雨", temperature_c="18-23", packing_hint="带伞和薄外套"
    )


@server.tool()
def search_places(city: str, interests: list[str] | None = None, weather: str = "") -> dict[str, object]:
    """根据城市、兴趣和约束条件搜索旅游景点"""
    return {
        "places": [
            {"name": "西湖·断桥", "type": "户外", "best_time": "上午", "note": "避开下午雨"},
            {"name": "中国茶叶博物馆", "type": "室内", "best_time": "下午", "note": "免费，适合雨天"},
            {"name": "河坊街", "type": "半室内", "best_time": "傍晚", "note": "小吃集中"},
        ]
    }


@server.tool()
def estimate_route(
    places: Annotated[list[str], Field(min_length=2, description="景点列表，按游览顺序")],
) -> dict[str, object]:
    """估算多个景点之间的交通时间"""
    return {"route": " → ".join(places), "total_transit_minutes": 55, "suggestion": "打车或公交均可，路线紧凑"}


if __name__ == "__main__":
    server.run("stdio")
