import Bonding

extension IdentifierStore {
    /// The store shared by devices on real and external controllers and the default radio:
    /// read when first used (where a manager is made, off its device's loop).
    static let persistent = IdentifierStore(fileURL: defaultFileURL())
}
