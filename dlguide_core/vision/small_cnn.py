"""The guide's small CIFAR-10 CNN (its registry entry is `architectures.CIFAR_NET`)."""

from __future__ import annotations

import torch
from torch import nn


class CifarNet(nn.Module):
    """The guide's CIFAR-10 CNN, with the `fc1` layer the guide's listing forgets to define."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, 32, 32) -> (B, classes)
        x = self.pool(torch.relu(self.conv1(x)))  # (B, 6, 14, 14)
        x = self.pool(torch.relu(self.conv2(x)))  # (B, 16, 5, 5)
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)
