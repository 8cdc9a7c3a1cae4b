"""Small and recurrent torch.nn models for tools/survey_models.py (issue 27 names them: where
per-call overhead, not arithmetic, decides the time).

Each is a common shape of its kind, written here from its published description, at batch 1:

* ``nn_conv_autoencoder``: two stride-2 convs down, two transposed convs up, on 1x28x28;
* ``nn_m5_audio``: the M5 raw-waveform net (Dai et al. 2017), four conv/BN/ReLU/max-pool stages
  on one second of 8 kHz audio, then global average pooling and a linear classifier;
* ``nn_tcn``: a temporal convolutional network (Bai et al. 2018): residual blocks of two dilated
  causal Conv1d (left-padded, the right side cut off), dilations 1, 2, 4, 8;
* ``nn_crnn``: a text-recognition CRNN: a conv stack over a 1x32x128 line image, its columns as a
  sequence into a bidirectional LSTM, a per-step linear classifier;
* ``nn_gru_seq2seq``: a GRU encoder and a one-step GRU decoder unrolled for 10 steps, each step
  feeding its projected output back as the next input (an ``nn.GRUCell`` decoder would export as
  ``aten::unsafe_chunk`` with a list output, which kuiper's PNNX reader does not map yet);
* ``raft_small``: torchvision's RAFT-small optical flow (two 128x128 frames given as one
  6-channel tensor), 4 flow updates.
"""

from __future__ import annotations

import torch
from torch import nn

SMALL_MODELS = {
    "nn_conv_autoencoder": (1, 1, 28, 28),
    "nn_m5_audio": (1, 1, 8000),
    "nn_tcn": (1, 16, 200),
    "nn_crnn": (1, 1, 32, 128),
    "nn_gru_seq2seq": (1, 20, 32),
    "raft_small": (1, 6, 128, 128),
}


class ConvAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
            nn.ConvTranspose2d(16, 1, 3, stride=2, padding=1, output_padding=1), nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


class M5(nn.Module):
    def __init__(self, classes=35, width=32):
        super().__init__()
        layers = []
        channels = 1
        for stage, (out, kernel, stride) in enumerate([(width, 80, 16), (width, 3, 1), (2 * width, 3, 1),
                                                       (2 * width, 3, 1)]):
            layers += [nn.Conv1d(channels, out, kernel, stride=stride), nn.BatchNorm1d(out), nn.ReLU(),
                       nn.MaxPool1d(4)]
            channels = out
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        y = self.features(x)
        y = nn.functional.avg_pool1d(y, y.shape[-1])
        return nn.functional.log_softmax(self.head(y.flatten(1)), dim=-1)


class TemporalBlock(nn.Module):
    def __init__(self, channels_in, channels, kernel, dilation):
        super().__init__()
        self.cut = (kernel - 1) * dilation
        self.conv1 = nn.Conv1d(channels_in, channels, kernel, padding=self.cut, dilation=dilation)
        self.conv2 = nn.Conv1d(channels, channels, kernel, padding=self.cut, dilation=dilation)
        self.down = nn.Conv1d(channels_in, channels, 1) if channels_in != channels else None

    def forward(self, x):
        y = torch.relu(self.conv1(x)[:, :, :-self.cut])  # causal: drop the right padding's outputs
        y = torch.relu(self.conv2(y)[:, :, :-self.cut])
        return torch.relu(y + (x if self.down is None else self.down(x)))


class TCN(nn.Module):
    def __init__(self, channels_in=16, channels=32, classes=10):
        super().__init__()
        blocks = []
        for level in range(4):
            blocks.append(TemporalBlock(channels_in if level == 0 else channels, channels, 3, 2 ** level))
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        return self.head(self.blocks(x)[:, :, -1])


class CRNN(nn.Module):
    def __init__(self, classes=37):
        super().__init__()

        def stage(cin, cout, pool):
            return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(pool)]

        self.features = nn.Sequential(*stage(1, 32, 2), *stage(32, 64, 2), *stage(64, 96, (2, 1)),
                                      *stage(96, 128, (4, 1)))
        self.rnn = nn.LSTM(128, 64, batch_first=True, bidirectional=True)
        self.head = nn.Linear(128, classes)

    def forward(self, x):
        y = self.features(x)  # (1, 128, 1, 32)
        y = y.squeeze(2).permute(0, 2, 1)  # columns as time steps
        y, _ = self.rnn(y)
        return self.head(y)


class GRUSeq2Seq(nn.Module):
    def __init__(self, features=32, hidden=64, steps=10):
        super().__init__()
        self.steps = steps
        self.encoder = nn.GRU(features, hidden, batch_first=True)
        self.decoder = nn.GRU(features, hidden, batch_first=True)
        self.project = nn.Linear(hidden, features)

    def forward(self, x):
        # Both encoder outputs are used: pnnx drops an unused first output of nn.GRU and then
        # wires the hidden state where the sequence was (its own Python fails the same way).
        encoded, h = self.encoder(x)
        step_input = self.project(encoded[:, -1:])
        outputs = []
        for _ in range(self.steps):
            y, h = self.decoder(step_input, h)
            step_input = self.project(y)
            outputs.append(step_input)
        return torch.cat(outputs, dim=1)


class RAFTSmall(nn.Module):
    """torchvision's RAFT-small; the two frames come as one tensor so the survey feeds one input."""

    def __init__(self, torchvision):
        super().__init__()
        self.raft = torchvision.models.optical_flow.raft_small(weights=None)

    def forward(self, frames):
        return self.raft(frames[:, :3], frames[:, 3:], num_flow_updates=4)[-1]


def build_small(name, torchvision_module):
    """The model called ``name`` (a key of SMALL_MODELS); ``torchvision_module`` is needed by RAFT only."""
    if name == "raft_small":
        return RAFTSmall(torchvision_module())
    return {"nn_conv_autoencoder": ConvAutoencoder, "nn_m5_audio": M5, "nn_tcn": TCN, "nn_crnn": CRNN,
            "nn_gru_seq2seq": GRUSeq2Seq}[name]()
