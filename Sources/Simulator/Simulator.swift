// Placeholder; the Simulator module's owner replaces it.
public enum Simulator {}
