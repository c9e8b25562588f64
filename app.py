from identity import create_app

app = create_app()
