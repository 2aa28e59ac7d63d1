// Linux extensions to the managers' init options. Apple's keys start with "CB…OptionKey"; these
// are marked "Linux" in their names so that code using them is plainly not iOS code.

/// **Linux extension.** The controller this manager's device uses, in the form `CB_TRANSPORT`
/// takes (`String`): `virtual`, `virtual:PATH` (the radio `cbtool radio --listen PATH` hosts for
/// several processes), `tcp:HOST:PORT`, `unix:PATH`, `serial:DEVICE[:BAUD]`, `hci:N`.
/// Overrides `CB_TRANSPORT` for this manager.
public let CBManagerOptionLinuxTransportKey = "kCBLinuxOptionTransport"

/// **Linux extension.** The ``CBVirtualRadio`` this manager's device joins (instead of
/// ``CBVirtualRadio/shared``).
public let CBManagerOptionLinuxRadioKey = "kCBLinuxOptionRadio"

/// **Linux extension.** Where this manager's device stands on its virtual radio, in metres
/// (`[Double]`: x, y and optionally z); RSSI follows from the distances.
public let CBManagerOptionLinuxPositionKey = "kCBLinuxOptionPosition"

/// **Linux extension.** A btsnoop file to capture this manager's HCI traffic in (`String`),
/// instead of `CB_SNOOP`.
public let CBManagerOptionLinuxSnoopPathKey = "kCBLinuxOptionSnoopPath"
