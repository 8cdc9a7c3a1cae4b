import torch, torch.nn as nn
class ScaledTanh(nn.Module):
    """y = alpha * tanh(beta * x), alpha/beta learned per channel."""
    def __init__(self, channels):
        super().__init__()
        self.alpha = nn.Parameter(torch.rand(channels) + 0.5)
        self.beta = nn.Parameter(torch.rand(channels) + 0.5)
    def forward(self, x):
        return self.alpha.view(1, -1, 1, 1) * torch.tanh(self.beta.view(1, -1, 1, 1) * x)
