/// Every typed command, for logs and for a controller that must tell known from unknown opcodes.
public enum HCICommands {
    /// The command types this module defines.
    public static let all: [any HCICommand.Type] = [
        // Link Control
        Disconnect.self, ReadRemoteVersionInformation.self,
        // Controller & Baseband
        SetEventMask.self, Reset.self, SetEventMaskPage2.self,
        // Informational
        ReadLocalVersionInformation.self, ReadLocalSupportedCommands.self, ReadLocalSupportedFeatures.self,
        ReadBufferSize.self, ReadBDADDR.self,
        // LE Controller
        LESetEventMask.self, LEReadBufferSizeV1.self, LEReadBufferSizeV2.self, LEReadLocalSupportedFeatures.self,
        LESetRandomAddress.self, LESetAdvertisingParameters.self, LESetAdvertisingData.self,
        LESetScanResponseData.self, LESetAdvertisingEnable.self, LESetScanParameters.self, LESetScanEnable.self,
        LECreateConnection.self, LECreateConnectionCancel.self,
    ]

    private static let names: [UInt16: String] = Dictionary(
        uniqueKeysWithValues: all.map { ($0.opcode.rawValue, $0.name) })

    /// The spec's name of a command this module knows, or nil.
    public static func name(of opcode: HCIOpcode) -> String? { names[opcode.rawValue] }
}
