"""Endpoints module."""

# No `from __future__ import annotations` here: dependency-injector reads the `Provide` markers of `Annotated`
# parameters at import, and would find strings.

from typing import Annotated, Any

from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, Request, Response, status

from llm_do.web import ChatAction, ChatRefused

from .containers import Container
from .repositories import NotFoundError
from .services import UserService

router = APIRouter()


@router.get("/users")
@inject
def get_list(
    user_service: Annotated[UserService, Depends(Provide[Container.user_service])],
) -> Any:
    return user_service.get_users()


@router.get("/users/{user_id}")
@inject
def get_by_id(
    user_id: int,
    user_service: Annotated[UserService, Depends(Provide[Container.user_service])],
) -> Any:
    try:
        return user_service.get_user_by_id(user_id)
    except NotFoundError:
        return Response(status_code=status.HTTP_404_NOT_FOUND)


@router.post("/users", status_code=status.HTTP_201_CREATED)
@inject
def add(
    user_service: Annotated[UserService, Depends(Provide[Container.user_service])],
) -> Any:
    return user_service.create_user()


@router.delete("/users/{user_id}", status_code=status.HTTP_204_NO_CONTENT)
@inject
def remove(
    user_id: int,
    user_service: Annotated[UserService, Depends(Provide[Container.user_service])],
) -> Response:
    try:
        user_service.delete_user_by_id(user_id)
    except NotFoundError:
        return Response(status_code=status.HTTP_404_NOT_FOUND)
    else:
        return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/status")
def get_status() -> Any:
    return {"status": "OK"}


owners: dict[str, str] = {}
"""Who opened each conversation with the assistant (the application's own table, in memory here)."""


async def only_its_owner(request: Request, conversation_id: str, action: ChatAction) -> bool:
    """Who may use a conversation: the person who opened it (`x-user`, standing for the application's login)."""
    user = request.headers.get("x-user")
    if not user:
        raise ChatRefused(401, "say who you are: the x-user header")
    if action in ("open", "send"):
        owners.setdefault(conversation_id, user)
    return owners.get(conversation_id) == user
