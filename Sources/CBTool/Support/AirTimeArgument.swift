import ArgumentParser
import VirtualController

/// `--air-time instant|timed` for the commands that host a radio.
extension AirTimeMode: ExpressibleByArgument {
    public init?(argument: String) {
        switch argument {
        case "instant": self = .instant
        case "timed": self = .timed
        default: return nil
        }
    }

    public static var allValueStrings: [String] { ["instant", "timed"] }
}
