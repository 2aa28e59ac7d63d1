// swift-tools-version: 6.1
import PackageDescription

// The book's example apps (Examples/, listed in README.md), written only against Apple's API: their
// logic in one library, so tests drive both sides in-process on a virtual radio, and one thin
// executable each (`swift run Scanner`, …).
var exampleTargets: [Target] {
    let executables = [
        "Scanner", "ConnectRSSI", "GATTExplorer", "ReadCharacteristic", "WriteCharacteristic", "Notifications",
        "Streaming", "EchoServer", "EchoClient", "RemoteLed", "LedRemote", "IBeacon", "BeaconLocator", "L2CAPStream",
    ]
    // The async style (the Linux extension CoreBluetoothAsync): a heart-rate monitor and the
    // book's EchoServer written with async/await, tested the same way.
    let asyncExecutables = ["HeartRateMonitor", "AsyncEchoServer"]
    return [.target(name: "ExampleApps", dependencies: ["CoreBluetooth"], path: "Examples/ExampleApps"),
            .target(name: "AsyncExampleApps", dependencies: ["ExampleApps", "CoreBluetooth", "CoreBluetoothAsync"],
                    path: "Examples/AsyncExampleApps")]
        + executables.map { .executableTarget(name: $0, dependencies: ["ExampleApps"], path: "Examples/\($0)") }
        + asyncExecutables.map {
            .executableTarget(name: $0, dependencies: ["AsyncExampleApps", "ExampleApps", "CoreBluetooth"], path: "Examples/\($0)")
        }
}

// One target per layer of the stack; each layer depends only on the layers below it.
let package = Package(
    name: "CoreBluetoothLinux",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "HCI", targets: ["HCI"]),
        .library(name: "HCITransport", targets: ["HCITransport"]),
        .library(name: "HCIDriver", targets: ["HCIDriver"]),
        .library(name: "VirtualController", targets: ["VirtualController"]),
        // Apple's Core Bluetooth API, so iOS code using `import CoreBluetooth` compiles unchanged.
        .library(name: "CoreBluetooth", targets: ["CoreBluetooth"]),
        // Linux extension: async/await and AsyncSequence beside Apple's delegate API.
        .library(name: "CoreBluetoothAsync", targets: ["CoreBluetoothAsync"]),
        // The stack's logger labels and levels (an app bootstrapping its own swift-log handler).
        .library(name: "StackLogging", targets: ["StackLogging"]),
        .executable(name: "cbtool", targets: ["cbtool"]),
        .executable(name: "cbbench", targets: ["cbbench"]),
        // One controller shared by processes (docs/daemon.md).
        .executable(name: "corebluetoothd", targets: ["corebluetoothd"]),
    ],
    dependencies: [
        // AES-128 (LE Encrypt, link-layer session keys) now; AES-CMAC and P-256 for SMP next.
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        // cbtool's subcommands, options and help.
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        // `cbtool lint`'s parser (the toolchain's own Swift grammar); 603 matches Swift 6.3.
        .package(url: "https://github.com/swiftlang/swift-syntax.git", from: "603.0.1"),
        // The stack's diagnostics: one Logger per layer (StackLogging); an app bootstraps its own handler.
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: exampleTargets + [
        // Little-endian readers/writers shared by every codec.
        .target(name: "ByteCoding"),
        // The stack's loggers: one label per layer (corebluetooth.hci, .l2cap, .att, …), the level
        // CB_LOG picks, and the standard-error handler the executables bootstrap.
        .target(name: "StackLogging", dependencies: ["Scheduling", .product(name: "Logging", package: "swift-log")]),
        // A log handler recording what it is given, for tests (not part of any product).
        .target(name: "LogTesting", dependencies: ["StackLogging", "Scheduling", .product(name: "Logging", package: "swift-log")]),
        // One function of the Swift runtime's stable ABI (swift_tryRetain), for WeakHandle.
        .target(name: "CSwiftRuntime"),
        // Serial event loops with a virtual clock: the one executor each controller + host runs on.
        .target(name: "Scheduling", dependencies: ["CSwiftRuntime"]),
        // The LE security toolbox (Core spec Vol 3 Part H §2.2): e, and later AES-CMAC, f4–f6, ah.
        .target(name: "LECrypto", dependencies: [
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "CryptoExtras", package: "swift-crypto"),
        ]),
        // The Security Manager (Vol 3 Part H): SMP PDUs and per-link pairing sessions in both roles.
        .target(name: "SMP", dependencies: ["StackLogging", .product(name: "Logging", package: "swift-log"), "ByteCoding", "HCI", "Scheduling", "LECrypto"]),
        // The Security Manager's bond store: keys and per-client GATT state per peer identity, one
        // JSON file per controller identity, written atomically off the caller's thread; and the
        // identifier store (Core Bluetooth's identifiers by identity address, merged across
        // processes under a file lock).
        .target(name: "Bonding", dependencies: ["StackLogging", .product(name: "Logging", package: "swift-log"), "HCI", "SMP", "LECrypto", "Scheduling"]),
        // A child process for BondingTests: rewrites a bond store until killed (the kill -9 test),
        // or hands out identifiers (two writers of one identifier store at once). Not part of any
        // product.
        .executableTarget(name: "BondStoreStressWriter", dependencies: ["StackLogging", "Bonding", "HCI", "SMP"]),
        // HCI packets (Vol 4 Part E): commands, events, ACL; one encoder and one decoder each.
        .target(name: "HCI", dependencies: ["ByteCoding"]),
        // H4 byte streams (TCP, Unix, UART, Linux user channel) and btsnoop captures.
        .target(name: "HCITransport", dependencies: ["HCI", "ByteCoding", "Scheduling"]),
        // Test doubles, one small target per layer (not part of any product), so that a layer's
        // tests link that layer only: a transport double, a scripted controller and a recording
        // sink; a lower layer under L2CAP recording PDUs; an ATT channel.
        .target(name: "HCITesting", dependencies: ["HCI", "HCITransport", "ByteCoding", "Scheduling"]),
        .target(name: "L2CAPTesting", dependencies: ["L2CAP", "HCI", "ByteCoding"]),
        .target(name: "ATTTesting", dependencies: ["ATT", "HCI", "ByteCoding"]),
        // Helpers for tests doing real I/O, on Foundation and Scheduling only (capture checks with
        // tshark, loopback ports, temporary paths, waits). Not part of any product.
        .target(name: "TestTools", dependencies: ["Scheduling"]),
        // Helpers for tests of the whole stack (connected hosts, a recording CBCentralManager
        // delegate), re-exporting TestTools. Not part of any product.
        .target(name: "TestSupport", dependencies: [
            "TestTools", "HCITransport", "HCI", "Scheduling", "ATT", "HostStack", "VirtualController", "CoreBluetooth",
        ]),
        // The host side of HCI: command flow control and timeouts, ACL credits, fragmentation.
        .target(name: "HCIDriver", dependencies: ["StackLogging", .product(name: "Logging", package: "swift-log"), "HCI", "HCITransport", "Scheduling"]),
        // Our software LE link layer behind a real HCI interface, and the virtual radio linking them.
        .target(name: "VirtualController", dependencies: ["StackLogging", .product(name: "Logging", package: "swift-log"), "HCI", "HCITransport", "Scheduling", "LECrypto"]),
        // L2CAP on LE-U (Vol 3 Part A): fixed channels, LE signalling, later credit-based channels.
        .target(name: "L2CAP", dependencies: ["StackLogging", .product(name: "Logging", package: "swift-log"), "ByteCoding", "HCI", "Scheduling"]),
        // The LE host on one controller: HCI driver + L2CAP links + GAP procedures (scan,
        // advertise, connect, encrypt), extended commands when the controller has them.
        .target(name: "HostStack", dependencies: ["StackLogging", .product(name: "Logging", package: "swift-log"), "HCI", "HCIDriver", "HCITransport", "L2CAP", "Scheduling"]),
        // The host on one controller, shared by every user of it (each Core Bluetooth manager, in
        // both roles): LEHost, the one GATT server and database, and per connection the ATT
        // bearer, GATT client and server connection; merged scans, connection ownership,
        // advertising sets, merged services.
        .target(name: "HostDevice", dependencies: ["StackLogging", .product(name: "Logging", package: "swift-log"),
            "HCI", "HCIDriver", "HCITransport", "HostStack", "L2CAP", "ATT", "GATT", "Scheduling", "SMP", "LECrypto", "Bonding",
        ]),
        // The role services over the host device (central now; the peripheral role next): what
        // an API client asks and hears, in plain values (addresses, handles, bytes), the boundary
        // a daemon carries between processes. API objects are made only above it.
        .target(name: "RoleServices", dependencies: ["StackLogging", .product(name: "Logging", package: "swift-log"),
            "HostDevice", "HostStack", "HCI", "HCIDriver", "HCITransport", "GAP", "GATT", "ATT", "AssignedNumbers", "Scheduling",
            "SMP", "L2CAP",
        ]),
        // corebluetoothd's wire protocol (docs/daemon.md): the role-service boundary's calls and
        // events as versioned, length-prefixed messages; one encoder and one decoder each.
        .target(name: "DaemonProtocol", dependencies: ["ByteCoding", "HCI", "AssignedNumbers", "ATT", "GATT", "Scheduling"]),
        // corebluetoothd's side of the protocol: a client's sessions (one role service each)
        // on the daemon's host device, messages in and out.
        .target(name: "CoreBluetoothDaemon", dependencies: ["StackLogging", .product(name: "Logging", package: "swift-log"),
            "DaemonProtocol", "RoleServices", "HostDevice", "HostStack", "HCI", "HCIDriver", "HCITransport", "GAP", "GATT", "ATT",
            "AssignedNumbers", "Scheduling", "VirtualController", "L2CAP", "SMP",
        ]),
        // The daemon: a thin entry to CoreBluetoothDaemon's command.
        .executableTarget(name: "corebluetoothd", dependencies: ["StackLogging", "CoreBluetoothDaemon"]),
        // A central app for the restoration test of CoreBluetoothDaemonTests, run as a child
        // process to be killed with SIGKILL. Not part of any product.
        .executableTarget(name: "RestoreProbe", dependencies: ["CoreBluetooth"]),
        // A process's managers on corebluetoothd: the role-service boundary implemented with
        // messages over the daemon's socket.
        .target(name: "RemoteRoles", dependencies: [
            "DaemonProtocol", "RoleServices", "HostDevice", "HCI", "HCIDriver", "GAP", "GATT", "ATT", "AssignedNumbers", "Scheduling",
            "L2CAP", "SMP",
        ]),
        // Bluetooth UUIDs and the SIG's assigned numbers, shared by the host stack layers.
        .target(name: "AssignedNumbers", dependencies: ["ByteCoding"]),
        // The Attribute Protocol (Vol 3 Part F): every PDU, and the bearer over L2CAP.
        .target(name: "ATT", dependencies: ["StackLogging", .product(name: "Logging", package: "swift-log"), "ByteCoding", "AssignedNumbers", "HCI", "L2CAP", "Scheduling"]),
        // GATT (Vol 3 Part G): the attribute database and server, and the client procedures.
        .target(name: "GATT", dependencies: ["StackLogging", .product(name: "Logging", package: "swift-log"),
            "ByteCoding", "AssignedNumbers", "ATT", "HCI", "L2CAP", "Scheduling", "LECrypto",
        ]),
        // GAP (Vol 3 Part C, CSS Part A): advertising data and address types.
        .target(name: "GAP", dependencies: ["ByteCoding", "AssignedNumbers", "HCI"]),
        // Apple's Core Bluetooth API (names, raw values, keys, errors) on top of the host stack.
        .target(name: "CoreBluetooth", dependencies: ["StackLogging", .product(name: "Logging", package: "swift-log"),
            "AssignedNumbers", "ByteCoding", "Scheduling", "HCI", "HCITransport", "HCIDriver", "VirtualController",
            "L2CAP", "HostStack", "HostDevice", "RoleServices", "ATT", "GATT", "GAP", "SMP", "Bonding", "DaemonProtocol",
            // The suites' daemon mode (CB_TEST_ON_DAEMON=1) serves each manager from a daemon in
            // the process (docs/daemon.md).
            "RemoteRoles", "CoreBluetoothDaemon",
        ]),
        // Linux extension: async/await and AsyncSequence over the same managers and objects,
        // hearing their delegate events through an event tap (the app keeps its delegate).
        .target(name: "CoreBluetoothAsync", dependencies: ["CoreBluetooth", "Scheduling"]),

        // `cbtool lint`: near misses of Core Bluetooth delegate requirements (no `@objc optional`
        // on Linux, so a misspelt optional method compiles and is never called).
        .target(name: "DelegateLint", dependencies: [
            .product(name: "SwiftSyntax", package: "swift-syntax"),
            .product(name: "SwiftParser", package: "swift-syntax"),
        ]),
        // cbtool's commands (demo, scan, explore, read/write/subscribe, simulate, radio, and the
        // raw-HCI ones), as a library so that tests run them in-process.
        .target(name: "CBTool", dependencies: ["StackLogging",
            "CoreBluetooth", "HCI", "HCITransport", "HCIDriver", "VirtualController", "Scheduling", "DelegateLint",
            // spec-from-capture decodes captures with the stack's own decoders.
            "ATT", "L2CAP", "GAP", "AssignedNumbers",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // The command-line tool: a thin entry to CBTool.
        .executableTarget(name: "cbtool", dependencies: ["StackLogging", "CBTool"]),
        // Benchmarks (release builds): figures recorded in BENCHMARKS.md.
        .executableTarget(name: "cbbench", dependencies: ["StackLogging",
            "CoreBluetooth", "HCI", "VirtualController",
            // The corebluetoothd workload hosts the daemon's side in the benchmark's process.
            "CoreBluetoothDaemon", "HostDevice", "Scheduling",
        ]),

        .testTarget(name: "StackLoggingTests", dependencies: ["StackLogging", "LogTesting", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "ByteCodingTests", dependencies: ["ByteCoding"]),
        .testTarget(name: "SchedulingTests", dependencies: ["Scheduling"]),
        .testTarget(name: "LECryptoTests", dependencies: ["LECrypto"]),
        .testTarget(name: "SMPTests", dependencies: ["LogTesting", "StackLogging", .product(name: "Logging", package: "swift-log"), "SMP", "LECrypto", "HCI", "ByteCoding", "Scheduling"]),
        // Runs BondStoreStressWriter (built beside the tests) as separate processes: to kill, and
        // two writing at once.
        .testTarget(name: "BondingTests", dependencies: ["LogTesting", "StackLogging", .product(name: "Logging", package: "swift-log"), "Bonding", "SMP", "HCI", "LECrypto"]),
        .testTarget(name: "HCITests", dependencies: ["HCI", "ByteCoding", "Scheduling"]),
        .testTarget(name: "HCITransportTests", dependencies: [
            "HCITransport", "HCI", "ByteCoding", "Scheduling", "HCITesting", "TestTools",
        ]),
        .testTarget(name: "L2CAPTests", dependencies: ["LogTesting", "StackLogging", .product(name: "Logging", package: "swift-log"), "L2CAP", "HCI", "Scheduling", "ByteCoding", "L2CAPTesting"]),
        // The host device's client rules, with virtual controllers on a virtual radio.
        .testTarget(name: "HostDeviceTests", dependencies: ["LogTesting", "StackLogging", .product(name: "Logging", package: "swift-log"),
            "HostDevice", "HostStack", "GATT", "ATT", "HCI", "HCITransport", "Scheduling", "VirtualController", "SMP",
            "Bonding",
        ]),
        .testTarget(name: "HostStackTests", dependencies: [
            "HostStack", "L2CAP", "HCI", "HCIDriver", "HCITransport", "Scheduling", "VirtualController", "TestSupport",
        ]),
        // Against independent stacks (Bumble, RootCanal) from the pinned venv scripts/setup-interop.sh makes.
        .testTarget(name: "InteropTests", dependencies: [
            "HostStack", "HCI", "HCIDriver", "HCITransport", "Scheduling", "VirtualController", "TestSupport",
            "CoreBluetooth", "CBTool",
        ]),
        .testTarget(name: "AssignedNumbersTests", dependencies: ["AssignedNumbers"]),
        .testTarget(name: "DaemonProtocolTests", dependencies: [
            "DaemonProtocol", "ByteCoding", "HCI", "AssignedNumbers", "ATT", "GATT", "Scheduling",
        ]),
        // Daemon clients' sessions, the socket, and managers on a daemon, against peripherals on
        // a virtual radio.
        .testTarget(name: "CoreBluetoothDaemonTests", dependencies: [
            "CoreBluetoothDaemon", "DaemonProtocol", "HostDevice", "HostStack", "HCI", "HCIDriver", "HCITransport", "GATT", "ATT",
            "AssignedNumbers", "Scheduling", "VirtualController", "CoreBluetooth", "TestTools", "RemoteRoles", "GAP", "TestSupport",
        ]),
        .testTarget(name: "ATTTests", dependencies: ["LogTesting", "StackLogging", .product(name: "Logging", package: "swift-log"),
            "ATT", "AssignedNumbers", "ByteCoding", "Scheduling", "L2CAP", "HostStack", "VirtualController", "HCI",
            "HCITransport", "ATTTesting", "TestSupport",
        ]),
        .testTarget(name: "GATTTests", dependencies: [
            "GATT", "ATT", "AssignedNumbers", "ByteCoding", "L2CAP", "Scheduling", "LECrypto",
            // Client against server on the virtual radio.
            "HostStack", "VirtualController", "HCI", "HCITransport", "TestSupport",
        ]),
        // LECrypto to make resolvable private addresses to classify.
        .testTarget(name: "GAPTests", dependencies: [
            "GAP", "AssignedNumbers", "HCI", "ByteCoding", "LECrypto", "Scheduling",
        ]),
        .testTarget(name: "CoreBluetoothTests", dependencies: [
            "CoreBluetooth", "AssignedNumbers", "ByteCoding", "Scheduling", "HCI", "HCITransport", "HCIDriver",
            "VirtualController", "L2CAP", "HostStack", "HostDevice", "ATT", "GATT", "GAP", "TestSupport",
        ]),
        // The async extension against peripheral managers on private radios.
        .testTarget(name: "CoreBluetoothAsyncTests", dependencies: ["CoreBluetoothAsync", "CoreBluetooth", "Scheduling"]),
        // cbtool in-process (demo, specs, argument errors) and as processes sharing a radio.
        // The lint's samples are read as files, never compiled.
        .testTarget(name: "CBToolTests", dependencies: ["CBTool", "CoreBluetooth", "DelegateLint", "TestTools"], exclude: ["LintSamples"]),
        // The example apps end to end, both sides on a virtual radio.
        .testTarget(name: "ExampleAppsTests", dependencies: ["ExampleApps", "AsyncExampleApps", "CoreBluetooth", "TestTools"]),
        .testTarget(name: "HCIDriverTests", dependencies: ["LogTesting", "StackLogging", .product(name: "Logging", package: "swift-log"), "HCIDriver", "HCI", "HCITransport", "Scheduling", "HCITesting"]),
        // LECrypto to check the resolvable private addresses the controller makes.
        .testTarget(name: "VirtualControllerTests", dependencies: [
            "VirtualController", "HCIDriver", "HCI", "HCITransport", "Scheduling", "HCITesting", "TestTools", "LECrypto",
        ]),
    ],
    swiftLanguageModes: [.v6]
)

