"""capsnet: CapsNet and Multi-Lane CapsNet (MLCN) with lanes placed on devices."""
